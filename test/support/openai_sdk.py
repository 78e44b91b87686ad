"""The official `openai` Python SDK (3.51) against decisiond's `POST /v1/decisions`, at its default
settings (retries, timeout). Run by test/openai-sdk.test.ts from a venv it creates.

Usage: python openai_sdk.py answers|errors|busy  (env DECISIOND_URL, DECISIOND_KEY, DECISIOND_MODEL,
DECISIOND_IMAGE). Prints one JSON object: what the SDK returned or raised, typed as Python saw it.
"""

import json
import os
import sys

import openai
from openai import OpenAI

client = OpenAI(base_url=os.environ["DECISIOND_URL"] + "/v1", api_key=os.environ["DECISIOND_KEY"])
model = os.environ["DECISIOND_MODEL"]
TICKET = "I was charged twice for my subscription this month. Please refund one charge."
QUESTION = [{"type": "predicate", "instructions": "Is it?"}]


def raised(call):
    """The exception a call raises, as {class, status, type, code, param, request_id}."""
    try:
        call()
    except openai.APIStatusError as error:
        body = error.body if isinstance(error.body, dict) else {}
        return {
            "class": type(error).__name__,
            "status": error.status_code,
            "type": body.get("type"),
            "code": body.get("code"),
            "param": body.get("param"),
            "request_id": error.request_id,
            "retry_after": error.response.headers.get("retry-after"),
        }
    return {"class": None}


def answers():
    decision = client.decisions.create(
        model=model,
        input=[
            {"role": "user", "content": TICKET},
            {"role": "assistant", "content": "Sorry about that. Let me check."},
        ],
        questions=[
            {"type": "predicate", "name": "refund", "instructions": "The customer asks for a refund."},
            {
                "type": "choice",
                "name": "team",
                "instructions": "Which team should handle it?",
                "choices": [{"value": "billing", "description": "Payments"}, {"value": "technical"}],
            },
            {
                "type": "choice",
                "name": "charged_twice",
                "instructions": "Was the customer charged twice?",
                "choices": [{"value": True}, {"value": False}],
            },
            {
                "type": "score",
                "name": "urgency",
                "instructions": "How urgent is it?",
                "levels": [{"label": "low"}, {"label": "high", "description": "today"}],
            },
            {
                "type": "predicate",
                "name": "photo",
                "instructions": [
                    {"type": "input_text", "text": "The photo shows a receipt."},
                    {"type": "input_image", "image_url": os.environ["DECISIOND_IMAGE"]},
                ],
            },
        ],
        safety_identifier="user-1234",
        prompt_cache_key="tickets",
    )
    out = []
    for a in decision.answers:
        entry = {"class": type(a).__name__, "type": a.type, "name": a.name}
        if a.type == "predicate":
            entry["probability"] = a.probability
        if a.type == "choice":
            entry["choice"] = a.choice
            entry["choice_is_bool"] = isinstance(a.choice, bool)
            entry["values"] = [p.value for p in a.probabilities]
            entry["sum"] = sum(p.probability for p in a.probabilities)
        if a.type == "score":
            entry["score"] = a.score
            entry["levels"] = [[p.label, p.value] for p in a.probabilities]
        out.append(entry)
    usage = decision.usage
    models = [m.id for m in client.models.list()]
    return {
        "model": decision.model,
        "answers": out,
        "usage": {
            "input": usage.input_tokens,
            "cached": usage.input_tokens_details.cached_tokens,
            "written": usage.input_tokens_details.cache_write_tokens,
            "output": usage.output_tokens,
            "reasoning": usage.output_tokens_details.reasoning_tokens,
            "total": usage.total_tokens,
        },
        "models": models,
    }


def errors():
    wrong = OpenAI(base_url=os.environ["DECISIOND_URL"] + "/v1", api_key="dsk_" + "0" * 40)
    one_choice = [{"type": "choice", "instructions": "Which?", "choices": [{"value": "only"}]}]
    return {
        "wrong_key": raised(lambda: wrong.decisions.create(model=model, input="x", questions=QUESTION)),
        "malformed": raised(lambda: client.decisions.create(model=model, input="x", questions=one_choice)),
        "unknown_model": raised(lambda: client.decisions.create(model="gpt-6-luna", input="x", questions=QUESTION)),
    }


def busy():
    return {"busy": raised(lambda: client.decisions.create(model=model, input="x", questions=QUESTION))}


print(json.dumps({"answers": answers, "errors": errors, "busy": busy}[sys.argv[1]]()))
