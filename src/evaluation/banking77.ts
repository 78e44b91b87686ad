import { mulberry32 } from "./format.js";

/**
 * Option descriptions for the Banking77 intents, written the way a support team would describe
 * its routing targets. Keys are the dataset's category names exactly (including the dataset's own
 * spellings `Refund_not_showing_up` and `reverted_card_payment?`), in `categories.json` order.
 */
export const BANKING77_DESCRIPTIONS: Readonly<Record<string, string>> = {
  card_arrival: "Asks where their new card is or when it will arrive",
  card_linking: "Wants to link a card they already have to the app",
  exchange_rate: "Asks what exchange rate is used or how rates work",
  card_payment_wrong_exchange_rate: "A card payment used the wrong exchange rate",
  extra_charge_on_statement: "Sees an unexpected extra fee on the statement",
  pending_cash_withdrawal: "A cash withdrawal is still pending",
  fiat_currency_support: "Asks which currencies can be held or exchanged",
  card_delivery_estimate: "Asks how long card delivery takes",
  automatic_top_up: "Asks about setting up automatic top-ups",
  card_not_working: "Their card does not work",
  exchange_via_app: "Wants to exchange currency in the app",
  lost_or_stolen_card: "Their card was lost or stolen",
  age_limit: "Asks about the minimum age to open an account",
  pin_blocked: "Their PIN is blocked",
  contactless_not_working: "Contactless payments do not work",
  top_up_by_bank_transfer_charge: "Asks about fees for topping up by bank transfer",
  pending_top_up: "A top-up is still pending",
  cancel_transfer: "Wants to cancel a transfer",
  top_up_limits: "Asks about top-up limits",
  wrong_amount_of_cash_received: "An ATM gave a different amount of cash than requested",
  card_payment_fee_charged: "Was charged a fee for a card payment",
  transfer_not_received_by_recipient: "The recipient has not received a transfer",
  supported_cards_and_currencies: "Asks which cards and currencies are supported",
  getting_virtual_card: "Wants to get a virtual card",
  card_acceptance: "Asks where the card is accepted",
  top_up_reverted: "A top-up was reverted or cancelled",
  balance_not_updated_after_cheque_or_cash_deposit:
    "The balance did not update after a cheque or cash deposit",
  card_payment_not_recognised: "Does not recognise a card payment",
  edit_personal_details: "Wants to change personal details",
  why_verify_identity: "Asks why identity verification is needed",
  unable_to_verify_identity: "Cannot complete identity verification",
  get_physical_card: "Wants to get a physical card",
  visa_or_mastercard: "Asks whether the card is Visa or Mastercard",
  topping_up_by_card: "Asks about topping up with a card",
  disposable_card_limits: "Asks about limits of disposable virtual cards",
  compromised_card: "Thinks their card has been compromised",
  atm_support: "Asks which ATMs can be used",
  direct_debit_payment_not_recognised: "Does not recognise a direct debit",
  passcode_forgotten: "Forgot the app passcode",
  declined_cash_withdrawal: "A cash withdrawal was declined",
  pending_card_payment: "A card payment is still pending",
  lost_or_stolen_phone: "Their phone was lost or stolen",
  request_refund: "Wants a refund",
  declined_transfer: "A transfer was declined",
  Refund_not_showing_up: "A refund has not shown up yet",
  declined_card_payment: "A card payment was declined",
  pending_transfer: "A transfer is still pending",
  terminate_account: "Wants to close the account",
  card_swallowed: "An ATM kept their card",
  transaction_charged_twice: "Was charged twice for one transaction",
  verify_source_of_funds: "Asks about proving the source of funds",
  transfer_timing: "Asks how long a transfer takes",
  "reverted_card_payment?": "A card payment was reverted",
  change_pin: "Wants to change the PIN",
  beneficiary_not_allowed: "Cannot add or pay a beneficiary",
  transfer_fee_charged: "Was charged a fee for a transfer",
  receiving_money: "Asks how to receive money",
  failed_transfer: "A transfer failed",
  transfer_into_account: "Asks how to transfer money into the account",
  verify_top_up: "Asks about verifying a top-up",
  getting_spare_card: "Wants an extra or spare card",
  top_up_by_cash_or_cheque: "Wants to top up with cash or a cheque",
  order_physical_card: "Wants to order a physical card",
  virtual_card_not_working: "Their virtual card does not work",
  wrong_exchange_rate_for_cash_withdrawal: "A cash withdrawal used the wrong exchange rate",
  get_disposable_virtual_card: "Wants a disposable virtual card",
  top_up_failed: "A top-up failed",
  balance_not_updated_after_bank_transfer: "The balance did not update after a bank transfer",
  cash_withdrawal_not_recognised: "Does not recognise a cash withdrawal",
  exchange_charge: "Asks about fees for currency exchange",
  top_up_by_card_charge: "Asks about fees for topping up by card",
  activate_my_card: "Wants to activate their card",
  cash_withdrawal_charge: "Was charged a fee for a cash withdrawal",
  card_about_to_expire: "Their card is about to expire",
  apple_pay_or_google_pay: "Asks about Apple Pay or Google Pay",
  verify_my_identity: "Asks how to verify their identity",
  country_support: "Asks which countries are supported",
};

/**
 * The intents offered for one item when a question shows `k` of them: the gold one and `k − 1`
 * others drawn without replacement (Fisher–Yates on a `mulberry32` stream), in `categories` order,
 * so the gold's position is not fixed.
 *
 * @param categories - every intent, in `categories.json` order
 * @param gold - the item's intent; one of `categories`
 * @param k - how many to offer: at least 2, fewer than `categories.length`
 * @param seed - 32-bit seed of the draw (the item's hash xor the user's `--seed`)
 * @returns `k` distinct intents, `gold` among them
 */
export function drawIntents(
  categories: readonly string[],
  gold: string,
  k: number,
  seed: number,
): string[] {
  const random = mulberry32(seed);
  const others = categories.filter((c) => c !== gold);
  for (let i = others.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [others[i], others[j]] = [others[j]!, others[i]!];
  }
  const chosen = new Set([gold, ...others.slice(0, k - 1)]);
  return categories.filter((c) => chosen.has(c));
}
