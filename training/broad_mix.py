"""The broad part of the training mix (issue 48): the 29 datasets beside issue 30's ten, each
asked in several ways, from the rows `decisiond eval convert` wrote (src/evaluation/datasets-*.ts).

Every dataset has a spec: instruction wordings written the way a product engineer writes them,
renamed option ids, a one-vs-rest yes/no wording for its choices, a negated wording or a yes/no
pair of option ids for its yes/no questions, other level wordings for its scales. From one source
row the builder draws one or two questions: the dataset's own type in a new wording (options
shuffled, renamed, described or not, a subset of many options with the gold kept), the row asked
as yes/no one-vs-rest, as a 2-way choice, as a coarser or reversed scale, or with the gold option
taken away and a "none of these" option that is then the answer. States are sometimes objects
whose field the instruction names. The canonical question of `decisiond eval` (the converter's
wording) is kept for a share of the rows, so the eval form is not unseen either.

Used by augment.py (`--broad`); every row read here passed augment.py's split and calibration
filters.
"""

from __future__ import annotations

import random
import re

# ---------------------------------------------------------------------------------------------
# Specs. `instr`: wordings of the dataset's own question; `noul`: a one-vs-rest wording of a
# choice ({o}: the option's description, or its id where it has none); `neg`: a wording whose
# answer is the opposite of the dataset's yes/no; `pairs`: option ids for the yes/no asked as a
# 2-way choice (yes side first); `names`: renamed ids; `none`: whether a "none of these" row is
# meaningful (routing and labelling tasks, multiple-choice answers); `scales`: other level texts.

QA_NOUL = ["Is \"{o}\" the correct answer?", "Is the right answer \"{o}\"?", "Would \"{o}\" be a correct answer here?"]

SPECS: dict[str, dict] = {
    "arc": {"instr": ["Which answer to this science question is correct?", "Pick the correct answer.", "Answer the science question.", "Which option is right?"], "noul": QA_NOUL, "none": True},
    "openbookqa": {"instr": ["Which answer completes the statement correctly?", "Choose the option that makes the statement true.", "Which ending is correct?"], "noul": ["Does \"{o}\" complete the statement correctly?", "Is \"{o}\" the right ending?"], "none": True},
    "qasc": {"instr": ["What is the correct answer to the question?", "Which option answers the question?", "Pick the best answer."], "noul": QA_NOUL, "none": True},
    "commonsenseqa": {"instr": ["Which answer makes the most sense?", "What is the most sensible answer?", "Choose the answer a reasonable person would give.", "Which option fits best?"], "noul": ["Is \"{o}\" the most sensible answer?", "Does \"{o}\" answer the question sensibly?"], "none": True},
    "mmlu": {"instr": ["Which answer is correct?", "Select the correct answer.", "Which of the options is true?", "Answer the exam question."], "noul": QA_NOUL, "none": True},
    "cosmosqa": {"instr": ["Answer the question about the story.", "Which answer fits the text best?", "Based on the passage, what is the most likely answer?"], "noul": ["Based on the text, is this a good answer: \"{o}\"?", "Is \"{o}\" the most plausible answer?"], "none": True, "question_in_state": True},
    "dream": {"instr": ["Answer the question about the conversation.", "According to the dialogue, which answer is right?", "What does the conversation tell us?"], "noul": ["According to the dialogue, is \"{o}\" the answer?", "Does the conversation support the answer \"{o}\"?"], "none": True, "question_in_state": True},
    "siqa": {"instr": ["Answer the question about the situation.", "What is the most likely answer?", "Which answer best fits how people behave?"], "noul": ["Is \"{o}\" a likely answer?", "Would \"{o}\" be the best answer here?"], "none": False, "question_in_state": True},
    "piqa": {"instr": ["Which solution reaches the goal?", "Which method works better?", "Which way of doing it makes physical sense?", "Pick the approach that would actually work."], "noul": ["Would this reach the goal: \"{o}\"?", "Does this method work: \"{o}\"?"], "none": False},
    "winogrande": {"instr": ["Who or what does the blank (_) stand for?", "Fill in the blank.", "Which name or thing belongs in the blank?"], "noul": ["Does \"{o}\" belong in the blank?", "Is the blank (_) \"{o}\"?"], "none": False},
    "copa": {"instr": ["Which is more plausible?", "Which alternative is more likely?"], "noul": ["Is this the more plausible alternative: \"{o}\"?"], "none": False},
    "pubmedqa": {"instr": ["What does the abstract answer to the question?", "According to the study, what is the answer?", "Based on the results, is the answer yes, no or maybe?"], "noul": ["Is the study's answer \"{o}\"?"], "names": {"yes": ["yes", "supported", "positive"], "no": ["no", "not_supported", "negative"], "maybe": ["maybe", "inconclusive", "unclear"]}, "none": False},
    "mrpc": {"instr": ["Do the two sentences say the same thing?", "Are these sentences paraphrases of each other?", "Do both sentences mean the same?", "Is sentence 2 a rewording of sentence 1?"], "neg": ["Do the two sentences say different things?", "Do the sentences differ in meaning?"], "pairs": [("paraphrase", "different"), ("same", "different"), ("equivalent", "not_equivalent"), ("duplicate", "distinct")]},
    "stsb": {"instr": ["How similar in meaning are the two sentences?", "Rate the semantic similarity of the sentences.", "How close in meaning are these two texts?"], "scales": [["0", "1", "2", "3", "4", "5"], ["unrelated", "same topic only", "some details shared", "roughly the same", "mostly the same", "identical meaning"]], "coarse": (["different", "partly similar", "same meaning"], [0, 0, 1, 1, 2, 2]), "noul": "Do the two sentences mean roughly the same?", "noul_min": 4, "reverse": ["How different in meaning are the two sentences?", "How far apart are the sentences in meaning?"]},
    "sick": {"instr": ["How related are the two sentences?", "Rate how closely related the sentences are.", "How much do the two sentences have to do with each other?"], "scales": [["1", "2", "3", "4", "5"], ["not related", "a little related", "related", "very related", "nearly identical"]], "coarse": (["unrelated", "related", "very related"], [0, 0, 1, 2, 2]), "noul": "Are the two sentences closely related?", "noul_min": 3, "reverse": ["How unrelated are the two sentences?", "How little do the sentences have in common?"]},
    "sick-entailment": {"instr": ["If sentence 1 is true, what follows for sentence 2?", "What is the relation between the two sentences?", "Does sentence 1 imply, contradict or say nothing about sentence 2?"], "names": {"entailment": ["entailment", "implied", "follows", "true"], "contradiction": ["contradiction", "contradicted", "false", "conflict"], "neutral": ["neutral", "unknown", "undetermined", "neither"]}, "noul": ["If sentence 1 is true, is sentence 2 {o}?"], "noul_text": {"entailment": "also true", "contradiction": "false", "neutral": "neither clearly true nor false"}, "none": False},
    "wic": {"instr": ["Does the word mean the same thing in both sentences?", "Is the word used in the same sense in both sentences?", "Same meaning of the word in the two sentences?"], "neg": ["Does the word have different meanings in the two sentences?"], "pairs": [("same", "different"), ("same_sense", "different_sense")]},
    "wsc": {"instr": None, "neg": None, "pairs": [("yes", "no"), ("correct", "wrong")]},
    "multirc": {"instr": ["According to the passage, is the candidate answer correct?", "Is the candidate answer right, given the passage?", "Does the passage support the candidate answer?"], "neg": ["According to the passage, is the candidate answer wrong?"], "pairs": [("correct", "incorrect"), ("right", "wrong"), ("true", "false")]},
    "mctaco": {"instr": ["Is the candidate answer plausible?", "Is this a reasonable answer to the question?", "Could the candidate answer be true?"], "neg": ["Is the candidate answer implausible?"], "pairs": [("plausible", "implausible"), ("likely", "unlikely"), ("yes", "no")]},
    "commonsenseqa2": {"instr": ["Is this statement true?", "Is the statement correct?", "True or false: is this right?", "Does this claim hold?"], "neg": ["Is this statement false?", "Is the claim wrong?"], "pairs": [("true", "false"), ("correct", "incorrect"), ("yes", "no")]},
    "axb": {"instr": ["Does the text show that the claim is true?", "Does the claim follow from the text?", "Is the claim implied by the text?"], "neg": ["Does the text fail to imply the claim?"], "pairs": [("entailment", "not_entailment"), ("follows", "does_not_follow"), ("implied", "not_implied")]},
    "axg": {"instr": ["Does the text show that the claim is true?", "Does the claim follow from the text?", "Must the claim be true if the text is?"], "neg": ["Does the text fail to imply the claim?"], "pairs": [("entailment", "not_entailment"), ("follows", "does_not_follow")]},
    "wnli": {"instr": ["Does the text show that the claim is true?", "Does the claim follow from the text?", "Is the claim a correct reading of the text?"], "neg": ["Does the claim misread the text?"], "pairs": [("entailment", "not_entailment"), ("follows", "does_not_follow")]},
    "atis": {"instr": ["What is the traveller asking for?", "Route this airline customer query.", "What does the customer want to know?", "Classify the travel request.", "Intent of the query?"], "noul": ["Is the customer asking about this: {o}?", "Does the request fall under \"{o}\"?"], "none": True},
    "snips": {"instr": ["What does the user want the assistant to do?", "Which skill should handle this command?", "Classify the voice command.", "What is the user's intent?"], "noul": ["Does the user want to: {o}?", "Is this command about: {o}?"], "names": {"AddToPlaylist": ["AddToPlaylist", "add_to_playlist", "playlist"], "BookRestaurant": ["BookRestaurant", "book_restaurant", "restaurant_booking"], "GetWeather": ["GetWeather", "weather", "get_weather"], "PlayMusic": ["PlayMusic", "play_music", "music"], "RateBook": ["RateBook", "rate_book", "book_rating"], "SearchCreativeWork": ["SearchCreativeWork", "search_creative_work", "find_media"], "SearchScreeningEvent": ["SearchScreeningEvent", "movie_times", "showtimes"]}, "none": True},
    "hwu64": {"instr": ["Which intent does this request to a home assistant have?", "Route this smart-speaker command.", "What does the user want?", "Classify the request."], "noul": ["Is the user's intent {o}?", "Does this request belong to {o}?"], "none": True},
    "emotion": {"instr": ["Which emotion does the writer express?", "How does the author feel?", "What is the main emotion of this text?", "Label the emotion."], "noul": ["Does the writer feel {o}?", "Is the emotion here {o}?", "Is the author expressing {o}?"], "names": {"sadness": ["sadness", "sad", "sorrow"], "joy": ["joy", "happy", "happiness"], "love": ["love", "affection"], "anger": ["anger", "angry", "rage"], "fear": ["fear", "afraid", "scared"], "surprise": ["surprise", "surprised", "astonishment"]}, "none": True},
    "goemotions": {"instr": ["What emotion does this comment express?", "Which emotion fits the comment best?", "Tag the comment's emotion.", "How does the commenter feel?"], "noul": ["Does the comment express {o}?", "Is the commenter showing {o}?"], "none": True},
    "financial_phrasebank": {"instr": ["Is this news good, bad or neutral for the company's investors?", "What is the sentiment of this financial news?", "How will shareholders read this headline?", "Classify the market sentiment."], "noul": ["Is this {o} for investors?"], "noul_text": {"positive": "good news", "negative": "bad news", "neutral": "neither good nor bad news"}, "names": {"positive": ["positive", "bullish", "good"], "negative": ["negative", "bearish", "bad"], "neutral": ["neutral", "mixed", "none"]}, "score": (["bad news", "neutral", "good news"], {"negative": 0, "neutral": 1, "positive": 2}), "none": False},
    "mpqa": {"instr": ["Does this phrase express a positive opinion?", "Is the phrase favourable?", "Is this a positive expression?"], "neg": ["Does this phrase express a negative opinion?", "Is the phrase critical?"], "pairs": [("positive", "negative"), ("favourable", "unfavourable"), ("pos", "neg")]},
    "sentiment_uci": {"instr": None, "neg": None, "pairs": [("positive", "negative"), ("good", "bad"), ("happy", "unhappy"), ("like", "dislike")]},
    "youtube_spam": {"instr": ["Is this comment spam?", "Should this comment be removed as spam?", "Is this a spam or self-promotion comment?", "Flag spam: is this one?"], "neg": ["Is this a genuine comment?", "Is the comment legitimate?"], "pairs": [("spam", "ham"), ("spam", "legit"), ("remove", "keep")]},
    "cola": {"instr": ["Is this sentence grammatically acceptable English?", "Is the sentence grammatical?", "Would a native speaker accept this sentence?", "Is this well-formed English?"], "neg": ["Is this sentence ungrammatical?", "Does the sentence have a grammar error?"], "pairs": [("acceptable", "unacceptable"), ("grammatical", "ungrammatical"), ("correct", "incorrect")]},
    "liar": {"instr": ["How true is the statement?", "Rate the truthfulness of the claim.", "How accurate is what the speaker said?", "Fact-check: how true is it?"], "scales": [["pants on fire", "false", "mostly false", "half true", "mostly true", "true"], ["0", "1", "2", "3", "4", "5"]], "coarse": (["false", "half true", "true"], [0, 0, 1, 1, 2, 2]), "noul": "Is the statement mostly or entirely true?", "noul_min": 4, "reverse": ["How false is the statement?", "How misleading is the claim?"]},
}

UCI_KIND = {"amazon": "product review", "imdb": "film review", "yelp": "restaurant review"}

NONE_IDS = ["none_of_these", "other", "none", "no_match", "unknown"]
NONE_DESC = ["None of the other options fits", "Nothing above applies", "None of these"]
FIELD_NAMES = ["text", "message", "body", "content", "comment", "query", "utterance"]


def only(d: dict):
    (k, v), = d.items()
    return k, v


def field_state(state, rng: random.Random) -> tuple[object, str]:
    """A string state under a named field of an object, and a phrase naming that field for the
    instruction (`" in `message`"`); other states unchanged, with an empty phrase."""
    if not isinstance(state, str) or rng.random() >= 0.25:
        return state, ""
    key = rng.choice(FIELD_NAMES)
    extra = rng.choice([{}, {"id": rng.randint(100, 99999)}, {"channel": rng.choice(["email", "chat", "web"])}, {"lang": "en"}])
    obj = {**extra, key: state} if rng.random() < 0.5 else {key: state, **extra}
    return obj, rng.choice([f" (the `{key}` field)", f" Look at `{key}`.", ""])


def with_field(instr: str, phrase: str) -> str:
    if not phrase:
        return instr
    return instr + phrase if phrase.startswith(" Look") else instr.rstrip("?.") + phrase + ("?" if instr.endswith("?") else ".")


def option_text(oid: str, desc) -> str:
    return desc if isinstance(desc, str) and desc else oid.replace("_", " ")


def broad_choice(b, dataset: str, row: dict, rng: random.Random) -> None:
    spec = SPECS[dataset]
    qid, q = only(row["request"]["questions"])
    gold = row["expected"][qid]
    state = row["request"]["state"]
    sid = row["id"]
    criteria = list(q["criteria"].items())
    lettered = all(re.fullmatch(r"[A-H]", k) for k, _ in criteria)
    instr_pool = [q["instructions"]] if spec.get("question_in_state") else spec["instr"] + [q["instructions"]]
    if spec.get("question_in_state") and rng.random() < 0.5:  # the question inside the state, a generic instruction
        state = {"context": state, "question": q["instructions"]} if isinstance(state, str) and rng.random() < 0.5 else f"{state}\n\nQuestion: {q['instructions']}"
        instr_pool = spec["instr"]
    kind = rng.random()
    state2, phrase = field_state(state, rng)
    if kind < 0.62:
        opts = criteria
        g = gold
        names = spec.get("names")
        if names and rng.random() < 0.6:
            pick = {k: rng.choice(names.get(k, [k])) for k, _ in opts}
            opts, g = [(pick[k], v) for k, v in opts], pick[gold]
        elif not lettered and rng.random() < 0.15 and len(opts) <= 8:  # long-form: letters or numbers with the texts as descriptions
            marks = [chr(65 + i) for i in range(len(opts))] if rng.random() < 0.6 else [str(i + 1) for i in range(len(opts))]
            order = list(range(len(opts)))
            rng.shuffle(order)
            relabel = {opts[j][0]: marks[i] for i, j in enumerate(order)}
            opts, g = [(relabel[k], option_text(k, v)) for k, v in opts], relabel[gold]
        if len(opts) > 8 and rng.random() < 0.4:  # a subset of many options, gold kept
            others = [o for o in opts if o[0] != g]
            opts = [o for o in opts if o[0] == g] + rng.sample(others, rng.randint(3, min(12, len(others))))
        if spec.get("none") and rng.random() < 0.12 and len(opts) >= 3:  # the gold taken away: "none of these" is the answer
            nid = rng.choice(NONE_IDS)
            opts = [o for o in opts if o[0] != g] + [(nid, rng.choice(NONE_DESC) if rng.random() < 0.5 else None)]
            g = nid
            b.choice(sid, state2, qid, with_field(rng.choice(instr_pool), phrase), opts, g, unclear=False, keep_desc=None if not lettered else True)
            return
        keep = True if (lettered or any(re.fullmatch(r"[A-H1-8]", k) for k, _ in opts)) else None
        b.choice(sid, state2, qid, with_field(rng.choice(instr_pool), phrase), opts, g, unclear=not lettered, keep_desc=keep)
    else:
        desc = dict(criteria)
        k = gold if rng.random() < 0.5 else rng.choice([c for c, _ in criteria if c != gold])
        text = spec.get("noul_text", {}).get(k) or option_text(k, desc.get(k))
        template = rng.choice(spec["noul"])
        if spec.get("question_in_state") and isinstance(state2, str) and "Question:" not in state2:
            state2 = f"{state2}\n\nQuestion: {q['instructions']}"
        b.noul(sid, state2, qid, with_field(template.format(o=text), phrase), k == gold)


def broad_noul(b, dataset: str, row: dict, rng: random.Random) -> None:
    spec = SPECS[dataset]
    qid, q = only(row["request"]["questions"])
    y = row["expected"][qid]
    state = row["request"]["state"]
    sid = row["id"]
    instr = spec["instr"]
    neg = spec["neg"]
    if dataset == "wsc":
        instr = [q["instructions"], q["instructions"].replace("In the text, does", "Does").replace("refer to", "mean")]
        neg = []
    if dataset == "sentiment_uci":
        kind_of = UCI_KIND[sid.split(":")[1].split("-")[0]]
        instr = [f"Is this {kind_of} positive?", f"Is the customer happy with it?", "Is the sentiment positive?", "Does the writer like it?"]
        neg = [f"Is this {kind_of} negative?", "Is the writer unhappy?"]
    state2, phrase = field_state(state, rng)
    kind = rng.random()
    if kind < 0.55 or not spec.get("pairs"):
        crit = q.get("criteria") or {}
        b.noul(sid, state2, qid, with_field(rng.choice(instr + [q["instructions"]]), phrase), y, crit.get("true"), crit.get("false"))
    elif kind < 0.72 and neg:
        b.noul(sid, state2, qid, with_field(rng.choice(neg), phrase), not y)
    else:
        t, f = rng.choice(spec["pairs"])
        opts = [(t, None), (f, None)]
        b.choice(sid, state2, qid, with_field(rng.choice(instr), phrase), opts, t if y else f, unclear=True, keep_desc=False)


def broad_score(b, dataset: str, row: dict, rng: random.Random) -> None:
    spec = SPECS[dataset]
    qid, q = only(row["request"]["questions"])
    y = row["expected"][qid]
    state = row["request"]["state"]
    sid = row["id"]
    levels = q["criteria"]
    state2, phrase = field_state(state, rng)
    kind = rng.random()
    instr = with_field(rng.choice(spec["instr"]), phrase)
    if kind < 0.45:
        lv = rng.choice([levels] + spec["scales"])
        b.score(sid, state2, qid, instr, list(lv), y)
    elif kind < 0.6:
        lv = list(reversed(rng.choice([levels] + spec["scales"])))
        b.score(sid, state2, qid, with_field(rng.choice(spec["reverse"]), phrase), lv, len(lv) - 1 - y)
    elif kind < 0.8:
        names, mapping = spec["coarse"]
        b.score(sid, state2, qid, instr, list(names), mapping[y])
    else:
        b.noul(sid, state2, qid, with_field(spec["noul"], phrase), y >= spec["noul_min"])


def broad_financial_score(b, row: dict, rng: random.Random) -> None:
    """Financial PhraseBank's 3 classes also as an ordered scale, bad < neutral < good news."""
    qid, _ = only(row["request"]["questions"])
    names, mapping = SPECS["financial_phrasebank"]["score"]
    b.score(row["id"], row["request"]["state"], "impact", rng.choice(["How good is this news for investors?", "Rate the news from bad to good for shareholders."]), list(names), mapping[row["expected"][qid]])


def broad(b, dataset: str, rows: list[dict], repeat: int = 1) -> None:
    """Adds `repeat` questions per row of a broad dataset (its converter's file name)."""
    rng = b.rng
    for _ in range(repeat):
        for row in rows:
            _, q = only(row["request"]["questions"])
            if rng.random() < 0.15:  # the eval's own wording, untouched but for the usual noise
                add_canonical(b, row, rng)
            elif q["type"] == "choice":
                broad_choice(b, dataset, row, rng)
            elif q["type"] == "noul":
                broad_noul(b, dataset, row, rng)
            else:
                broad_score(b, dataset, row, rng)
            if dataset == "financial_phrasebank" and rng.random() < 0.25:
                broad_financial_score(b, row, rng)


def add_canonical(b, row: dict, rng: random.Random) -> None:
    qid, q = only(row["request"]["questions"])
    y = row["expected"][qid]
    if q["type"] == "choice":
        opts = list(q["criteria"].items())
        keep = True if any(v for _, v in opts) else False
        b.choice(row["id"], row["request"]["state"], qid, q["instructions"], opts, y, unclear=False, keep_desc=keep)
    elif q["type"] == "noul":
        b.add(row["id"], row["request"]["state"], qid, q, y)
    else:
        b.score(row["id"], row["request"]["state"], qid, q["instructions"], list(q["criteria"]), y)


# Rows drawn per dataset and pass: about the same number of questions per task, fewer for the
# long-state ones (their questions cost several times the tokens).
BROAD_CAPS = {
    "arc": 300, "openbookqa": 260, "qasc": 260, "commonsenseqa": 300, "mmlu": 300, "cosmosqa": 160,
    "dream": 200, "siqa": 260, "piqa": 260, "winogrande": 300, "copa": 55, "pubmedqa": 100,
    "mrpc": 260, "stsb": 300, "sick": 220, "sick-entailment": 220, "wic": 300, "wsc": 45,
    "multirc": 140, "mctaco": 260, "commonsenseqa2": 300, "axb": 200, "axg": 140, "wnli": 300,
    "atis": 260, "snips": 260, "hwu64": 300, "emotion": 300, "goemotions": 300,
    "financial_phrasebank": 300, "mpqa": 260, "sentiment_uci": 300, "youtube_spam": 300,
    "cola": 300, "liar": 300,
}
