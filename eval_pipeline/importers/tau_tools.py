"""Tool roles of the τ-bench and τ²-bench domains, for the registry `import tau-bench` infers.

Where it came from (read, not copied):
- τ-bench (github.com/sierra-research/tau-bench, commit 59a200c): tau_bench/envs/airline/tools/*.py and
  tau_bench/envs/retail/tools/*.py. τ-bench does not tag its tools; a tool is read-only here when its
  `invoke` never changes the `data` it is given (only local result lists are built).
- τ²-bench (github.com/sierra-research/tau2-bench, commit a2c0247): src/tau2/domains/{airline,retail,telecom}/tools.py,
  where every agent tool is decorated `@is_tool(ToolType.READ | WRITE | THINK | GENERIC)`: READ and THINK are
  read-only, WRITE is not; the GENERIC tools are `calculate` (pure arithmetic, read-only) and
  `transfer_to_human_agents` (see below). Both versions agree on every name they share; τ²-bench adds
  `get_flight_status` (airline) and the telecom domain. The telecom *user* tools (user_tools.py) are the
  simulated user's own, never the agent's, so they are not here: the importer leaves user calls out.

`transfer_to_human_agents` returns "Transfer successful" and changes no state: it is the escalation tool, not a
database write, so it is read-only (docs/agent_lane.md: optional when the reference makes it, never a surplus when the
agent makes it); its free-text `summary` is never compared with the reference (value rule `any`).
"""

from __future__ import annotations

from typing import Any

_ORIGIN = "a τ-bench / τ²-bench tool seen in the calls; its role from eval_pipeline/importers/tau_tools.py"
_READ = {"read_only": True, "description": _ORIGIN}
_WRITE = {"read_only": False, "description": _ORIGIN}

# name -> the registry fields the importer sets (read_only, description, and value_rules where an argument is
# not compared with the reference)
TAU_TOOL_ROLES: dict[str, dict[str, Any]] = {
    # airline (τ-bench and τ²-bench)
    "book_reservation": _WRITE,
    "calculate": _READ,
    "cancel_reservation": _WRITE,
    "get_flight_status": _READ,  # τ²-bench only
    "get_reservation_details": _READ,
    "get_user_details": _READ,
    "list_all_airports": _READ,
    "search_direct_flight": _READ,
    "search_onestop_flight": _READ,
    "send_certificate": _WRITE,
    "think": _READ,
    "transfer_to_human_agents": {**_READ, "value_rules": {"args": {"summary": "any"}}},
    "update_reservation_baggages": _WRITE,
    "update_reservation_flights": _WRITE,
    "update_reservation_passengers": _WRITE,
    # retail (τ-bench and τ²-bench)
    "cancel_pending_order": _WRITE,
    "exchange_delivered_order_items": _WRITE,
    "find_user_id_by_email": _READ,
    "find_user_id_by_name_zip": _READ,
    "get_item_details": _READ,  # τ²-bench only
    "get_order_details": _READ,
    "get_product_details": _READ,
    "list_all_product_types": _READ,
    "modify_pending_order_address": _WRITE,
    "modify_pending_order_items": _WRITE,
    "modify_pending_order_payment": _WRITE,
    "modify_user_address": _WRITE,
    "return_delivered_order_items": _WRITE,
    # telecom (τ²-bench), the agent's tools
    "disable_roaming": _WRITE,
    "enable_roaming": _WRITE,
    "get_bills_for_customer": _READ,
    "get_customer_by_id": _READ,
    "get_customer_by_name": _READ,
    "get_customer_by_phone": _READ,
    "get_data_usage": _READ,
    "get_details_by_id": _READ,
    "refuel_data": _WRITE,
    "resume_line": _WRITE,
    "send_payment_request": _WRITE,
    "suspend_line": _WRITE,
}

TAU_ESCALATION_TOOL = "transfer_to_human_agents"
