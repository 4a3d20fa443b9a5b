"""The helpdesk tool registry of the sample data and the sandbox that executes calls on it.

The registry follows the readings of docs/metrics.md tools.yaml.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

ENVIRONMENT_VERSION = "helpdesk-sandbox-7"

_TICKET_ID = {"type": "string", "pattern": "^T-[0-9]{4}$"}
_ORDER_ID = {"type": "string", "pattern": "^[0-9]{5}$"}
_CUSTOMER_ID = {"type": "string", "pattern": "^c-[0-9]{3}$"}
_SUBSCRIPTION_ID = {"type": "string", "pattern": "^sub-[0-9]{4}$"}
# Email and address values carry no pattern: de-identification replaces them with tokens such as
# <EMAIL_3f9a2c1d>, and argument validity must be the same before and after it (docs/privacy.md, issue 6).
_EMAIL = {"type": "string", "minLength": 3}
_MONEY = {"type": "number", "exclusiveMinimum": 0, "maximum": 5000}
_TEMPLATES = [
    "refund_confirmation",
    "cancellation_confirmation",
    "address_updated",
    "credit_applied",
    "shipping_update",
    "return_label",
    "ticket_summary",
    "escalation_notice",
    "refund_already_issued",
    "cancellation_not_possible",
]


def _obj(required: list[str], **properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


# (name, description, read_only, destructive, args schema)
TOOL_DEFINITIONS: tuple[tuple[str, str, bool, bool, dict[str, Any]], ...] = (
    (
        "search_docs",
        "Search the policy knowledge base.",
        True,
        False,
        _obj(
            ["query"], query={"type": "string", "minLength": 1}, top_k={"type": "integer", "minimum": 1, "maximum": 50}
        ),
    ),
    ("get_ticket", "Read a support ticket.", True, False, _obj(["ticket_id"], ticket_id=_TICKET_ID)),
    ("get_order", "Read an order with its charges and refunds.", True, False, _obj(["order_id"], order_id=_ORDER_ID)),
    ("get_customer", "Read a customer record.", True, False, _obj(["customer_id"], customer_id=_CUSTOMER_ID)),
    ("lookup_customer", "Find a customer by the email address on file.", True, False, _obj(["email"], email=_EMAIL)),
    (
        "get_subscription",
        "Read a subscription.",
        True,
        False,
        _obj(["subscription_id"], subscription_id=_SUBSCRIPTION_ID),
    ),
    ("list_orders", "List the orders of a customer.", True, False, _obj(["customer_id"], customer_id=_CUSTOMER_ID)),
    (
        "verify_identity",
        "Send and check a one-time code; marks the customer verified.",
        False,
        False,
        _obj(
            ["customer_id", "method"],
            customer_id=_CUSTOMER_ID,
            method={"type": "string", "enum": ["email_code", "sms_code"]},
        ),
    ),
    (
        "issue_refund",
        "Refund an amount of an order to the original payment method.",
        False,
        True,
        _obj(
            ["order_id", "amount", "reason"],
            order_id=_ORDER_ID,
            amount=_MONEY,
            reason={
                "type": "string",
                "enum": ["duplicate_charge", "damaged", "not_as_described", "price_adjustment", "event_cancelled"],
            },
        ),
    ),
    (
        "send_email",
        "Send a templated email to the customer.",
        False,
        False,
        _obj(["to", "template"], to=_EMAIL, template={"type": "string", "enum": _TEMPLATES}),
    ),
    (
        "set_status",
        "Change the status of a ticket.",
        False,
        False,
        _obj(
            ["ticket_id", "status"],
            ticket_id=_TICKET_ID,
            status={"type": "string", "enum": ["open", "pending", "resolved", "closed"]},
        ),
    ),
    (
        "escalate_to_human",
        "Hand the ticket to a human queue.",
        False,
        False,
        _obj(
            ["ticket_id", "queue"],
            ticket_id=_TICKET_ID,
            queue={"type": "string", "enum": ["billing", "security", "technical", "general"]},
        ),
    ),
    (
        "close_account",
        "Close a customer account permanently.",
        False,
        True,
        _obj(["customer_id"], customer_id=_CUSTOMER_ID),
    ),
    (
        "cancel_subscription",
        "Cancel a subscription, at the end of the period or now.",
        False,
        True,
        _obj(["subscription_id", "at_period_end"], subscription_id=_SUBSCRIPTION_ID, at_period_end={"type": "boolean"}),
    ),
    (
        "update_address",
        "Replace the address of a customer.",
        False,
        False,
        _obj(
            ["customer_id", "address"],
            customer_id=_CUSTOMER_ID,
            address=_obj(
                ["line1", "city", "postal_code", "country"],
                line1={"type": "string", "minLength": 1},
                city={"type": "string", "minLength": 1},
                postal_code={"type": "string", "minLength": 1},
                country={"type": "string", "pattern": "^[A-Z]{2}$"},
            ),
        ),
    ),
    (
        "apply_credit",
        "Add account credit.",
        False,
        False,
        _obj(
            ["customer_id", "amount", "reason"],
            customer_id=_CUSTOMER_ID,
            amount={"type": "number", "exclusiveMinimum": 0, "maximum": 500},
            reason={"type": "string", "enum": ["sla_breach", "goodwill", "price_protection"]},
        ),
    ),
    (
        "send_password_reset",
        "Email a password reset link.",
        False,
        False,
        _obj(["customer_id"], customer_id=_CUSTOMER_ID),
    ),
    (
        "add_note",
        "Add an internal note to a ticket.",
        False,
        False,
        _obj(["ticket_id", "note"], ticket_id=_TICKET_ID, note={"type": "string", "minLength": 1, "maxLength": 2000}),
    ),
    (
        "create_return_label",
        "Create a prepaid return label for an item of an order.",
        False,
        False,
        _obj(["order_id", "sku"], order_id=_ORDER_ID, sku={"type": "string", "pattern": "^SKU-[0-9]{2}-[A-Z]$"}),
    ),
)


def registry(environment_version: str = ENVIRONMENT_VERSION) -> dict[str, Any]:
    """tools.yaml as a mapping."""
    return {
        "environment_version": environment_version,
        "tools": [
            {"name": name, "description": description, "read_only": read_only, "destructive": destructive, "args": args}
            for name, description, read_only, destructive, args in TOOL_DEFINITIONS
        ],
    }


# ---------------------------------------------------------------- sandbox


class ToolFailure(Exception):
    """A call the sandbox refuses: becomes a step with status `error`."""


def get_path(state: dict, path: str) -> Any:
    """The value at a dotted path, or None when absent."""
    node: Any = state
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _set_path(state: dict, path: str, value: Any) -> None:
    parts = path.split(".")
    node = state
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value


@dataclass
class Sandbox:
    """The mock environment of one attempt: state, the clock and the state diffs calls make."""

    state: dict
    clock: str
    diffs: list[dict] = field(default_factory=list)

    def change(self, path: str, after: Any) -> None:
        before = get_path(self.state, path)
        self.diffs.append({"path": path, "before": copy.deepcopy(before), "after": copy.deepcopy(after)})
        _set_path(self.state, path, copy.deepcopy(after))

    def _entity(self, kind: str, key: Any, label: str) -> dict:
        if not isinstance(key, str):
            raise ToolFailure(f"invalid arguments: {label} must be a string")
        entity = self.state.get(kind, {}).get(key)
        if entity is None:
            raise ToolFailure(f"{label} {key} not found")
        return entity

    def _customer_by_email(self, email: str) -> str:
        for cid, customer in self.state.get("customers", {}).items():
            if customer.get("email") == email:
                return cid
        raise ToolFailure(f"no customer with email {email}")

    def _next_id(self, key: str) -> str:
        current = self.state["meta"][key]
        prefix, number = current.rsplit("-", 1)
        self.change(f"meta.{key}", f"{prefix}-{int(number) + 1}")
        return current

    def call(self, tool: str, args: dict) -> Any:
        """Execute a call; returns its result or raises ToolFailure."""
        return getattr(self, f"_t_{tool}")(**args)

    # read-only tools
    def _t_get_ticket(self, ticket_id):
        return {"ticket_id": ticket_id, **copy.deepcopy(self._entity("tickets", ticket_id, "ticket_id"))}

    def _t_get_order(self, order_id):
        return {"order_id": order_id, **copy.deepcopy(self._entity("orders", order_id, "order_id"))}

    def _t_get_customer(self, customer_id):
        return {"customer_id": customer_id, **copy.deepcopy(self._entity("customers", customer_id, "customer_id"))}

    def _t_lookup_customer(self, email):
        cid = self._customer_by_email(email)
        return {"customer_id": cid, "name": self.state["customers"][cid]["name"]}

    def _t_get_subscription(self, subscription_id):
        return {
            "subscription_id": subscription_id,
            **copy.deepcopy(self._entity("subscriptions", subscription_id, "subscription_id")),
        }

    def _t_list_orders(self, customer_id):
        orders = self.state.get("orders", {})
        return {
            "orders": [
                {"order_id": oid, "amount": o["amount"], "status": o["status"]}
                for oid, o in sorted(orders.items())
                if o["customer_id"] == customer_id
            ]
        }

    # actions
    def _t_verify_identity(self, customer_id, method):
        self._entity("customers", customer_id, "customer_id")
        self.change(f"customers.{customer_id}.verified", True)
        return {"verified": True, "method": method}

    def _t_issue_refund(self, order_id, amount, reason):
        order = self._entity("orders", order_id, "order_id")
        if isinstance(amount, bool) or not isinstance(amount, int | float):
            raise ToolFailure("invalid arguments: amount must be a number")
        refund_id = self._next_id("next_refund_id")
        self.change(f"refunds.{refund_id}", {"order_id": order_id, "amount": amount, "reason": reason})
        total = round(order["refunded_amount"] + amount, 2)
        self.change(f"orders.{order_id}.refunded_amount", total)
        self.change(f"orders.{order_id}.status", "refunded" if total >= order["amount"] else "partially_refunded")
        return {"refund_id": refund_id, "amount": amount, "status": "pending_settlement"}

    def _t_send_email(self, to, template):
        cid = self._customer_by_email(to)
        sent = list(get_path(self.state, f"notifications.{cid}.templates") or [])
        self.change(f"notifications.{cid}.templates", [*sent, template])
        return {"message_id": f"msg-{len(self.diffs):04d}", "to": to, "template": template}

    def _t_set_status(self, ticket_id, status):
        self._entity("tickets", ticket_id, "ticket_id")
        self.change(f"tickets.{ticket_id}.status", status)
        return {"ticket_id": ticket_id, "status": status}

    def _t_escalate_to_human(self, ticket_id, queue):
        self._entity("tickets", ticket_id, "ticket_id")
        self.change(f"tickets.{ticket_id}.queue", queue)
        self.change(f"tickets.{ticket_id}.escalated", True)
        return {"handoff": f"H-{ticket_id[2:]}", "queue": queue}

    def _t_close_account(self, customer_id):
        self._entity("customers", customer_id, "customer_id")
        self.change(f"customers.{customer_id}.status", "closed")
        self.change(f"customers.{customer_id}.closed_at", self.clock)
        for sid, sub in sorted(self.state.get("subscriptions", {}).items()):
            if sub["customer_id"] == customer_id and sub["status"] == "active":
                self.change(f"subscriptions.{sid}.status", "cancelled")
        return {"customer_id": customer_id, "status": "closed"}

    def _t_cancel_subscription(self, subscription_id, at_period_end):
        self._entity("subscriptions", subscription_id, "subscription_id")
        status = "cancelling" if at_period_end else "cancelled"
        self.change(f"subscriptions.{subscription_id}.status", status)
        return {"subscription_id": subscription_id, "status": status}

    def _t_update_address(self, customer_id, address):
        self._entity("customers", customer_id, "customer_id")
        self.change(f"customers.{customer_id}.address", address)
        return {"customer_id": customer_id, "address": address}

    def _t_apply_credit(self, customer_id, amount, reason):
        customer = self._entity("customers", customer_id, "customer_id")
        self.change(f"customers.{customer_id}.credit_balance", round(customer["credit_balance"] + amount, 2))
        return {"customer_id": customer_id, "credit_balance": round(customer["credit_balance"], 2), "reason": reason}

    def _t_send_password_reset(self, customer_id):
        self._entity("customers", customer_id, "customer_id")
        self.change(f"customers.{customer_id}.reset_link_sent", True)
        return {"sent": True, "expires_in_minutes": 30}

    def _t_add_note(self, ticket_id, note):
        ticket = self._entity("tickets", ticket_id, "ticket_id")
        self.change(f"tickets.{ticket_id}.notes", [*ticket.get("notes", []), note])
        return {"ticket_id": ticket_id, "notes": len(ticket.get("notes", []))}

    def _t_create_return_label(self, order_id, sku):
        self._entity("orders", order_id, "order_id")
        rma = self._next_id("next_return_id")
        self.change(f"returns.{rma}", {"order_id": order_id, "sku": sku, "label": f"https://labels.example/{rma}.pdf"})
        return {"return_id": rma, "sku": sku}
