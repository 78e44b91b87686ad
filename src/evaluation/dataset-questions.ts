/**
 * The questions the converters ask, written the way a user of the API would: one constant per
 * dataset question, and the option descriptions of the multi-class datasets.
 */

export const SST2_NOUL = {
  type: "noul",
  instructions: "Is the sentiment of the text positive?",
  criteria: {
    true: "The reviewer likes the movie",
    false: "The reviewer dislikes the movie",
  },
} as const;

export const SST2_CHOICE = {
  type: "choice",
  instructions: "What is the sentiment of this movie review?",
  criteria: {
    positive: "The reviewer likes the movie",
    negative: "The reviewer dislikes the movie",
  },
} as const;

export const SST5_LEVELS = [
  "Very negative",
  "Negative",
  "Neutral or mixed",
  "Positive",
  "Very positive",
];

export const AG_NEWS_OPTIONS: Record<string, string> = {
  World: "World news: international affairs, politics, conflicts, diplomacy",
  Sports: "Sports: games, teams, athletes, competitions",
  Business: "Business: companies, markets, the economy, finance",
  "Sci/Tech": "Science and technology: computing, the internet, space, research",
};

/** TREC coarse classes in the dataset's id order (0 DESC … 5 NUM). */
export const TREC_OPTIONS: Record<string, string> = {
  DESC: "A description, definition, explanation or reason",
  ENTY: "An entity: a thing, animal, product, substance, event, color, term, etc.",
  ABBR: "An abbreviation, or what an abbreviation stands for",
  HUM: "A person, a group of people or an organization",
  LOC: "A location: a place, city, country, mountain, etc.",
  NUM: "A number: a count, date, distance, amount, price, period, etc.",
};

export const ENTAILMENT_NOUL = {
  type: "noul",
  instructions: "Does the text show that the claim is true?",
  criteria: {
    true: "The text implies the claim",
    false: "The text does not imply the claim",
  },
} as const;

export const RTE_CHOICE = {
  type: "choice",
  instructions: "Does the text show that the claim is true?",
  criteria: {
    entailment: "The text implies the claim",
    not_entailment: "The text does not imply the claim",
  },
} as const;

export const CB_CHOICE = {
  type: "choice",
  instructions: "What does the text say about the claim?",
  criteria: {
    entailment: "The text implies that the claim is true",
    contradiction: "The text implies that the claim is false",
    neutral: "The text does not say whether the claim is true or false",
  },
} as const;

export const CLIMATE_FEVER_CHOICE = {
  type: "choice",
  instructions: "Does the evidence support or refute the claim?",
  criteria: {
    SUPPORTS: "The evidence supports the claim",
    REFUTES: "The evidence contradicts the claim",
    NOT_ENOUGH_INFO: "The evidence neither supports nor contradicts the claim",
  },
} as const;
