"""A small, deterministic customer-support agent for dataset runs (no network, no model).

Four agents cooperate: `triage` reads the message and decides the intent; `orders` looks
orders up and handles refunds (escalating large ones to `escalation`); `knowledge` answers
from the help-centre articles; `responder` writes the reply. Model calls are simulated with
token counts derived from the text, so cost is computed from the pricing table like a real
agent's. Everything is reported through the recorder (see evalstream.connectors.targets.recorder).

Configuration (from variants.yaml `config:`), defaults in brackets:
- `verify_orders` [true]: look the order up before refunding it.
- `refund_limit` [100]: refunds above this many dollars go to a human (escalation).
- `responder_model` ["claude-sonnet-4-5"], `triage_model` ["claude-haiku-4-5"].
- `cite_articles` [true]: name the help-centre article in knowledge answers.
- `redact_cards` [true]: mask card numbers in replies and state.

Run as a Python target:  --target examples/agent/support_agent.py:run
or as a subprocess:      --target "cmd:python examples/agent/support_agent.py"
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from evalstream.connectors.targets.recorder import Recorder, jsonl_sink

JSON = Any

ORDERS: dict[str, dict[str, JSON]] = {
    "A-1001": {
        "item": "USB-C cable",
        "amount": 25.0,
        "status": "delivered",
        "tracking": "1Z999AA10",
    },
    "A-1002": {
        "item": "Standing desk",
        "amount": 450.0,
        "status": "delivered",
        "tracking": "1Z999AA20",
    },
    "A-1003": {"item": "Keyboard", "amount": 89.0, "status": "in transit", "tracking": "1Z999AA30"},
    "A-1004": {
        "item": "Monitor arm",
        "amount": 60.0,
        "status": "refunded",
        "tracking": "1Z999AA40",
    },
}
ARTICLES = {
    "password": ("KB-101", "Reset your password from Settings → Security → Reset password."),
    "invoice": ("KB-204", "Invoices are under Account → Billing → Invoices, as PDF."),
    "shipping": ("KB-310", "Standard shipping takes 3-5 business days."),
}
ORDER_ID = re.compile(r"\bA-\d{4}\b")
CARD = re.compile(r"\b(?:\d[ -]?){13,16}\b")
RUDE = ("idiot", "stupid", "useless")


def _tokens(text: str) -> int:
    return max(1, round(len(text.split()) * 1.3))


def _think(rec: Recorder, agent: str, model: str, prompt: str, answer: str, *, parent: str) -> str:
    """A simulated model call: provider:start / provider:end with deterministic usage."""
    return rec.llm_call(
        model=model,
        input=[{"role": "user", "content": prompt}],
        output=answer,
        usage={"input_tokens": 180 + _tokens(prompt), "output_tokens": _tokens(answer)},
        agent=agent,
        duration_ms=40.0 + 2.0 * _tokens(answer),
        parent=parent,
    )


def _intent(message: str) -> str:
    text = message.lower()
    if any(word in text for word in RUDE):
        return "abuse"
    if "refund" in text or "money back" in text:
        return "refund"
    if "where is" in text or "track" in text or "shipping" in text:
        return "shipping"
    for topic in ARTICLES:
        if topic in text:
            return "knowledge"
    return "other"


def run(case_input: dict[str, JSON], recorder: Recorder) -> JSON:
    """Handle one support ticket; returns the reply (or a JSON hand-off summary)."""
    cfg = {
        "verify_orders": True,
        "refund_limit": 100.0,
        "responder_model": "claude-sonnet-4-5",
        "triage_model": "claude-haiku-4-5",
        "cite_articles": True,
        "redact_cards": True,
        **recorder.config,
    }
    rec = recorder
    message = str(case_input.get("message", ""))
    redact = bool(cfg["redact_cards"])
    message_for_state = CARD.sub("[card redacted]", message) if redact else message
    rec.state("ticket", {"status": "open", "message": message_for_state})

    triage = rec.activated("triage")
    intent = _intent(message)
    match = ORDER_ID.search(message)
    order_id = match.group(0) if match else None
    _think(rec, "triage", cfg["triage_model"], message, f"intent={intent}", parent=triage)
    decided = rec.emit("triage:complete", {"intent": intent, "orderId": order_id}, agent="triage")
    rec.state("intent", intent, agent="triage")

    reply: str
    status = "resolved"
    if intent == "abuse":
        reply = (
            "I'm sorry this has been frustrating. I'm here to help: could you tell me your "
            "order number so I can look into it?"
        )
        rec.emit(
            "policy:violation",
            {
                "rule": "abusive-language",
                "severity": "low",
                "message": "customer used abusive language",
            },
        )
        status = "waiting"
    elif intent in ("refund", "shipping"):
        reply, status = _orders(rec, cfg, intent, order_id, decided)
    elif intent == "knowledge":
        reply = _knowledge(rec, cfg, message, decided)
    else:
        reply = "Thanks for reaching out! Could you tell me a bit more about what you need?"
        status = "waiting"

    responder = rec.activated("responder", trigger=decided)
    if cfg["redact_cards"]:
        reply = CARD.sub("[card redacted]", reply)
    _think(rec, "responder", cfg["responder_model"], f"{message}\n{reply}", reply, parent=responder)
    rec.text(reply, agent="responder")
    rec.state(
        "ticket",
        {"status": status, "message": message_for_state, "redacted": bool(cfg["redact_cards"])},
        agent="responder",
    )
    rec.completed("responder")
    if case_input.get("format") == "json":
        return {"intent": intent, "orderId": order_id, "status": status, "reply": reply}
    return reply


def _orders(
    rec: Recorder, cfg: dict[str, JSON], intent: str, order_id: str | None, trigger: str
) -> tuple[str, str]:
    act = rec.activated("orders", trigger=trigger)
    if order_id is None:
        return "Could you send me your order number (it looks like A-1234)?", "waiting"
    order: dict[str, JSON] | None = None
    if cfg["verify_orders"] or intent == "shipping":
        call = rec.tool_call("lookup_order", {"order_id": order_id}, agent="orders", parent=act)
        order = ORDERS.get(order_id)
        rec.tool_result(call, order or {"error": "not found"}, agent="orders")
        if order is None:
            return (
                f"I couldn't find order {order_id}. Could you double-check the number?",
                "waiting",
            )
    if intent == "shipping":
        assert order is not None
        rec.completed("orders")
        return (
            f"Your {order['item']} ({order_id}) is {order['status']}; tracking number "
            f"{order['tracking']}.",
            "resolved",
        )
    amount = float(order["amount"]) if order else float(ORDERS.get(order_id, {}).get("amount", 0))
    if order is not None and order["status"] == "refunded":
        rec.completed("orders")
        return f"Order {order_id} was already refunded.", "resolved"
    limit = cfg["refund_limit"]
    if limit is not None and amount > float(limit):
        review = rec.emit("refund:review", {"orderId": order_id, "amount": amount}, agent="orders")
        rec.completed("orders")
        rec.activated("escalation", trigger=review)
        rec.tool_call(
            "escalate", {"order_id": order_id, "reason": "refund over limit"}, agent="escalation"
        )
        rec.completed("escalation")
        return (
            f"A refund of ${amount:.2f} needs a specialist's approval; I've escalated "
            f"order {order_id} and they will contact you within one business day.",
            "escalated",
        )
    call = rec.tool_call(
        "issue_refund", {"order_id": order_id, "amount": amount}, agent="orders", parent=act
    )
    rec.tool_result(call, {"ok": True}, agent="orders")
    rec.emit("refund:issued", {"orderId": order_id, "amount": amount}, agent="orders")
    rec.completed("orders")
    return f"Done: I've issued a refund of ${amount:.2f} for order {order_id}.", "resolved"


def _knowledge(rec: Recorder, cfg: dict[str, JSON], message: str, trigger: str) -> str:
    act = rec.activated("knowledge", trigger=trigger)
    topic = next(t for t in ARTICLES if t in message.lower())
    call = rec.tool_call("search_kb", {"query": topic}, agent="knowledge", parent=act)
    article_id, text = ARTICLES[topic]
    rec.tool_result(call, {"id": article_id, "text": text}, agent="knowledge")
    rec.completed("knowledge")
    return f"{text} (see {article_id})" if cfg["cite_articles"] else text


def main() -> int:
    """Subprocess mode: read {caseId, episodeId, input, config} on stdin, write signals."""
    request = json.loads(sys.stdin.read())
    rec = Recorder(
        episode_id=request["episodeId"],
        case_id=request.get("caseId"),
        input=request.get("input"),
        config=request.get("config") or {},
        sink=jsonl_sink(sys.stdout),
    )
    rec.start()
    rec.end(run(request.get("input") or {}, rec))
    return 0


if __name__ == "__main__":
    sys.exit(main())
