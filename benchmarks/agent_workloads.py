# ruff: noqa: E501
"""Write the agent workloads (specviz/workloads/agent-*.jsonl) from the scripts below.

Each workload is a few tasks an agent works through step by step; request k of a task is the
prompt the agent sends for its k-th reply: the instructions, the task, and the conversation so
far (its earlier replies and what came back). Run from the repository root:

    python benchmarks/agent_workloads.py            # rewrite the three files
    python benchmarks/agent_workloads.py --check    # exit 1 unless they match the scripts
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[1] / "specviz" / "workloads"

# --- (a) tool calling: JSON calls, JSON observations ---------------------------------------------

TOOLS_SYSTEM = """You are an assistant that completes tasks by calling tools. Reply with exactly \
one JSON object per turn: {{"tool": "<name>", "arguments": {{...}}}} to call a tool, or \
{{"final": "<answer for the user>"}} when the task is done. Never invent results: wait for each \
observation.

Tools:
{tools}"""

TOOL_TASKS: list[dict[str, Any]] = [
    {
        "name": "trip",
        "tools": [
            "search_flights(origin: str, destination: str, date: str) -> list of flights",
            "search_hotels(city: str, check_in: str, check_out: str, near: str, max_price: int)"
            " -> list of hotels",
            "get_hotel_details(hotel_id: str) -> hotel",
            "get_weather(city: str, date: str) -> forecast",
            "book_flight(flight_id: str, passengers: int) -> booking",
            "book_hotel(hotel_id: str, check_in: str, check_out: str, guests: int) -> booking",
            "convert_currency(amount: float, source: str, target: str) -> amount",
            "send_email(to: str, subject: str, body: str) -> status",
        ],
        "user": "Plan a trip to Lisbon from Berlin for two adults, May 12 to May 15. Keep flights "
        "and hotel under 900 EUR in total, stay near Baixa, check the weather, book everything "
        "and email the plan to anna.kraus@example.com.",
        "steps": [
            (
                {
                    "tool": "search_flights",
                    "arguments": {"origin": "BER", "destination": "LIS", "date": "2025-05-12"},
                },
                [
                    {"flight_id": "TP541", "depart": "07:05", "arrive": "09:35", "price_eur": 142},
                    {"flight_id": "FR1842", "depart": "13:20", "arrive": "15:55", "price_eur": 96},
                    {"flight_id": "LH1166", "depart": "18:40", "arrive": "21:10", "price_eur": 171},
                ],
            ),
            (
                {
                    "tool": "search_flights",
                    "arguments": {"origin": "LIS", "destination": "BER", "date": "2025-05-15"},
                },
                [
                    {"flight_id": "TP544", "depart": "10:15", "arrive": "14:40", "price_eur": 138},
                    {"flight_id": "FR1843", "depart": "16:30", "arrive": "20:55", "price_eur": 89},
                ],
            ),
            (
                {
                    "tool": "search_hotels",
                    "arguments": {
                        "city": "Lisbon",
                        "check_in": "2025-05-12",
                        "check_out": "2025-05-15",
                        "near": "Baixa",
                        "max_price": 450,
                    },
                },
                [
                    {
                        "hotel_id": "H-2231",
                        "name": "Hotel Baixa Prata",
                        "price_eur": 396,
                        "rating": 8.4,
                    },
                    {
                        "hotel_id": "H-1187",
                        "name": "Rossio Garden Inn",
                        "price_eur": 429,
                        "rating": 8.9,
                    },
                    {
                        "hotel_id": "H-3045",
                        "name": "Casa do Comercio",
                        "price_eur": 348,
                        "rating": 7.6,
                    },
                ],
            ),
            (
                {"tool": "get_hotel_details", "arguments": {"hotel_id": "H-1187"}},
                {
                    "hotel_id": "H-1187",
                    "name": "Rossio Garden Inn",
                    "address": "Rua dos Sapateiros 41",
                    "distance_to_baixa_m": 250,
                    "breakfast": True,
                    "free_cancellation_until": "2025-05-10",
                },
            ),
            (
                {"tool": "get_weather", "arguments": {"city": "Lisbon", "date": "2025-05-12"}},
                {
                    "city": "Lisbon",
                    "date": "2025-05-12",
                    "high_c": 23,
                    "low_c": 15,
                    "rain_chance": 0.1,
                },
            ),
            (
                {"tool": "book_flight", "arguments": {"flight_id": "FR1842", "passengers": 2}},
                {
                    "booking_id": "BK-77120",
                    "flight_id": "FR1842",
                    "passengers": 2,
                    "total_eur": 192,
                    "status": "confirmed",
                },
            ),
            (
                {"tool": "book_flight", "arguments": {"flight_id": "FR1843", "passengers": 2}},
                {
                    "booking_id": "BK-77121",
                    "flight_id": "FR1843",
                    "passengers": 2,
                    "total_eur": 178,
                    "status": "confirmed",
                },
            ),
            (
                {
                    "tool": "book_hotel",
                    "arguments": {
                        "hotel_id": "H-1187",
                        "check_in": "2025-05-12",
                        "check_out": "2025-05-15",
                        "guests": 2,
                    },
                },
                {
                    "booking_id": "BK-77122",
                    "hotel_id": "H-1187",
                    "nights": 3,
                    "total_eur": 429,
                    "status": "confirmed",
                },
            ),
            (
                {
                    "tool": "send_email",
                    "arguments": {
                        "to": "anna.kraus@example.com",
                        "subject": "Lisbon trip, May 12-15",
                        "body": "Flights: FR1842 BER-LIS May 12 13:20 (BK-77120), FR1843 LIS-BER May 15 16:30 (BK-77121). Hotel: Rossio Garden Inn, Rua dos Sapateiros 41, 3 nights with breakfast (BK-77122). Total 799 EUR. Weather on arrival: 23 C, 10% chance of rain.",
                    },
                },
                {"status": "sent", "message_id": "m-5521"},
            ),
            (
                {
                    "final": "Booked: FR1842 out on May 12 and FR1843 back on May 15 (370 EUR for two), and 3 nights at Rossio Garden Inn near Baixa with breakfast (429 EUR). Total 799 EUR, under the 900 EUR budget. Expect about 23 C and little rain. The plan was emailed to anna.kraus@example.com."
                },
                None,
            ),
        ],
    },
    {
        "name": "refund",
        "tools": [
            "get_customer(email: str) -> customer",
            "list_orders(customer_id: str, status: str) -> list of orders",
            "get_order(order_id: str) -> order with items",
            "get_shipment(tracking_id: str) -> shipment events",
            "check_refund_policy(category: str) -> policy",
            "create_refund(order_id: str, item_id: str, reason: str, amount: float) -> refund",
            "update_ticket(ticket_id: str, status: str, note: str) -> ticket",
            "send_email(to: str, subject: str, body: str) -> status",
        ],
        "user": 'Ticket T-40912 from li.wei@example.com: "My kettle arrived with a cracked lid. '
        'I want my money back for it, not a replacement." Handle the ticket.',
        "steps": [
            (
                {"tool": "get_customer", "arguments": {"email": "li.wei@example.com"}},
                {"customer_id": "C-55810", "name": "Li Wei", "since": "2021-03-02", "tier": "gold"},
            ),
            (
                {
                    "tool": "list_orders",
                    "arguments": {"customer_id": "C-55810", "status": "delivered"},
                },
                [
                    {"order_id": "O-918273", "date": "2025-04-02", "total": 84.97, "items": 3},
                    {"order_id": "O-902211", "date": "2025-02-18", "total": 19.99, "items": 1},
                ],
            ),
            (
                {"tool": "get_order", "arguments": {"order_id": "O-918273"}},
                {
                    "order_id": "O-918273",
                    "tracking_id": "TRK-4410932",
                    "items": [
                        {
                            "item_id": "I-1",
                            "name": "Glass electric kettle 1.7 l",
                            "category": "kitchen_appliances",
                            "price": 49.99,
                        },
                        {
                            "item_id": "I-2",
                            "name": "Tea strainer",
                            "category": "kitchen_tools",
                            "price": 7.99,
                        },
                        {
                            "item_id": "I-3",
                            "name": "Loose leaf green tea 250 g",
                            "category": "grocery",
                            "price": 26.99,
                        },
                    ],
                },
            ),
            (
                {"tool": "get_shipment", "arguments": {"tracking_id": "TRK-4410932"}},
                {
                    "tracking_id": "TRK-4410932",
                    "events": [
                        {"date": "2025-04-03", "status": "shipped"},
                        {
                            "date": "2025-04-05",
                            "status": "delivered",
                            "note": "left with neighbour",
                        },
                    ],
                },
            ),
            (
                {"tool": "check_refund_policy", "arguments": {"category": "kitchen_appliances"}},
                {
                    "category": "kitchen_appliances",
                    "window_days": 30,
                    "damaged_on_arrival": "full refund without return",
                    "photo_required": True,
                },
            ),
            (
                {
                    "tool": "update_ticket",
                    "arguments": {
                        "ticket_id": "T-40912",
                        "status": "waiting_on_customer",
                        "note": "Asked for a photo of the cracked lid (policy requires one for damaged-on-arrival refunds).",
                    },
                },
                {"ticket_id": "T-40912", "status": "waiting_on_customer"},
            ),
            (
                {
                    "tool": "send_email",
                    "arguments": {
                        "to": "li.wei@example.com",
                        "subject": "Your kettle (order O-918273)",
                        "body": "Sorry about the cracked lid. Please reply with a photo of it and we will refund the kettle in full; there is no need to send it back.",
                    },
                },
                {
                    "status": "sent",
                    "reply": {
                        "received": "2025-04-07",
                        "attachment": "lid.jpg",
                        "text": "Here is the photo.",
                    },
                },
            ),
            (
                {
                    "tool": "create_refund",
                    "arguments": {
                        "order_id": "O-918273",
                        "item_id": "I-1",
                        "reason": "damaged_on_arrival",
                        "amount": 49.99,
                    },
                },
                {"refund_id": "R-22871", "amount": 49.99, "status": "approved", "expected_days": 5},
            ),
            (
                {
                    "tool": "update_ticket",
                    "arguments": {
                        "ticket_id": "T-40912",
                        "status": "solved",
                        "note": "Photo received. Refund R-22871 of 49.99 for item I-1 approved, no return needed.",
                    },
                },
                {"ticket_id": "T-40912", "status": "solved"},
            ),
            (
                {
                    "final": "Refunded the kettle (49.99, refund R-22871, about 5 days) after the customer sent a photo of the cracked lid; no return is needed and ticket T-40912 is solved."
                },
                None,
            ),
        ],
    },
    {
        "name": "incident",
        "tools": [
            "get_alerts(service: str) -> list of active alerts",
            "query_logs(service: str, level: str, since: str) -> log lines",
            "get_metrics(service: str, metric: str, window: str) -> series",
            "get_deployments(service: str, limit: int) -> deployments",
            "rollback_deployment(service: str, version: str) -> status",
            "update_incident(incident_id: str, status: str, summary: str) -> incident",
            "post_message(channel: str, text: str) -> status",
        ],
        "user": "You are on call. Incident INC-3317: checkout latency is high. Find the cause, "
        "mitigate it, and keep #incidents informed.",
        "steps": [
            (
                {"tool": "get_alerts", "arguments": {"service": "checkout-api"}},
                [
                    {
                        "alert": "p99_latency_high",
                        "since": "14:02",
                        "value_ms": 2840,
                        "threshold_ms": 800,
                    }
                ],
            ),
            (
                {
                    "tool": "get_metrics",
                    "arguments": {
                        "service": "checkout-api",
                        "metric": "p99_latency_ms",
                        "window": "1h",
                    },
                },
                {
                    "points": [
                        ["13:40", 410],
                        ["13:50", 430],
                        ["14:00", 1950],
                        ["14:10", 2790],
                        ["14:20", 2840],
                    ]
                },
            ),
            (
                {"tool": "get_deployments", "arguments": {"service": "checkout-api", "limit": 3}},
                [
                    {
                        "version": "v2.41.0",
                        "time": "13:58",
                        "author": "mkovacs",
                        "change": "batch price lookups",
                    },
                    {
                        "version": "v2.40.2",
                        "time": "2025-05-06 10:12",
                        "author": "jdoe",
                        "change": "fix currency rounding",
                    },
                    {
                        "version": "v2.40.1",
                        "time": "2025-05-05 16:30",
                        "author": "jdoe",
                        "change": "log tweaks",
                    },
                ],
            ),
            (
                {
                    "tool": "query_logs",
                    "arguments": {"service": "checkout-api", "level": "error", "since": "13:55"},
                },
                [
                    "14:00:12 ERROR pricing client timeout after 2000 ms (batch size 250)",
                    "14:00:13 ERROR pricing client timeout after 2000 ms (batch size 250)",
                    "14:01:40 ERROR retry budget exhausted for pricing client",
                ],
            ),
            (
                {
                    "tool": "post_message",
                    "arguments": {
                        "channel": "#incidents",
                        "text": "INC-3317: checkout p99 at 2.8 s since 14:00, right after v2.41.0 (batch price lookups). Pricing calls time out at batch size 250. Rolling back to v2.40.2.",
                    },
                },
                {"status": "posted"},
            ),
            (
                {
                    "tool": "rollback_deployment",
                    "arguments": {"service": "checkout-api", "version": "v2.40.2"},
                },
                {"status": "completed", "version": "v2.40.2", "finished": "14:27"},
            ),
            (
                {
                    "tool": "get_metrics",
                    "arguments": {
                        "service": "checkout-api",
                        "metric": "p99_latency_ms",
                        "window": "15m",
                    },
                },
                {"points": [["14:25", 2810], ["14:28", 1220], ["14:31", 450], ["14:34", 420]]},
            ),
            (
                {
                    "tool": "query_logs",
                    "arguments": {"service": "checkout-api", "level": "error", "since": "14:28"},
                },
                [],
            ),
            (
                {
                    "tool": "update_incident",
                    "arguments": {
                        "incident_id": "INC-3317",
                        "status": "mitigated",
                        "summary": "v2.41.0 batched price lookups (250 per call) and the pricing client timed out; rolled back to v2.40.2 at 14:27, p99 back to 420 ms.",
                    },
                },
                {"incident_id": "INC-3317", "status": "mitigated"},
            ),
            (
                {
                    "tool": "post_message",
                    "arguments": {
                        "channel": "#incidents",
                        "text": "INC-3317 mitigated: rollback to v2.40.2 done at 14:27, p99 back to 420 ms and no new errors. Follow-up: smaller pricing batches before re-deploying v2.41.0.",
                    },
                },
                {"status": "posted"},
            ),
            (
                {
                    "final": "INC-3317 is mitigated: v2.41.0's batched price lookups timed out the pricing client; rolling back to v2.40.2 brought p99 latency from 2.8 s to 420 ms. #incidents is updated; the follow-up is to shrink the batches before re-deploying."
                },
                None,
            ),
        ],
    },
]


def tool_requests() -> list[dict[str, Any]]:
    """One request per assistant turn of each tool-calling task."""
    rows = []
    for task in TOOL_TASKS:
        tools = "\n".join(f"- {t}" for t in task["tools"])
        head = TOOLS_SYSTEM.format(tools=tools) + f"\n\nUser: {task['user']}\n"
        history = ""
        for step, (call, observation) in enumerate(task["steps"]):
            prompt = f"{head}{history}\nAssistant:"
            rows.append(_row("agent-tools", task["name"], step, prompt, 160))
            history += f"\nAssistant: {json.dumps(call)}\n"
            if observation is not None:
                history += f"Observation: {json.dumps(observation)}\n"
    return rows


# --- (b) code editing: the whole file back after each small change -------------------------------

CODE_SYSTEM = (
    "You are a coding assistant editing one file. After each request, reply with the whole "
    "updated file in a single ```python block and nothing else. Change only what the request "
    "asks for."
)

CODE_TASKS: list[dict[str, Any]] = [
    {
        "name": "inventory",
        "path": "inventory.py",
        "file": '''"""A small in-memory inventory."""


class Inventory:
    def __init__(self):
        self.items = {}

    def add(self, name, quantity):
        if name in self.items:
            self.items[name] += quantity
        else:
            self.items[name] = quantity

    def remove(self, name, quantity):
        self.items[name] -= quantity

    def count(self, name):
        return self.items.get(name, 0)

    def total(self):
        total = 0
        for name in self.items:
            total += self.items[name]
        return total
''',
        "edits": [
            (
                "Add type hints to every method.",
                [
                    (
                        "    def __init__(self):\n        self.items = {}",
                        "    def __init__(self) -> None:\n        self.items: dict[str, int] = {}",
                    ),
                    (
                        "    def add(self, name, quantity):",
                        "    def add(self, name: str, quantity: int) -> None:",
                    ),
                    (
                        "    def remove(self, name, quantity):",
                        "    def remove(self, name: str, quantity: int) -> None:",
                    ),
                    ("    def count(self, name):", "    def count(self, name: str) -> int:"),
                    ("    def total(self):", "    def total(self) -> int:"),
                ],
            ),
            (
                "Simplify add with dict.get.",
                [
                    (
                        "        if name in self.items:\n            self.items[name] += quantity\n        else:\n            self.items[name] = quantity",
                        "        self.items[name] = self.items.get(name, 0) + quantity",
                    ),
                ],
            ),
            (
                "Make remove raise KeyError for an unknown item.",
                [
                    (
                        "    def remove(self, name: str, quantity: int) -> None:\n",
                        '    def remove(self, name: str, quantity: int) -> None:\n        if name not in self.items:\n            raise KeyError(f"unknown item: {name}")\n',
                    ),
                ],
            ),
            (
                "Make remove raise ValueError when there is not enough stock.",
                [
                    (
                        '            raise KeyError(f"unknown item: {name}")\n',
                        '            raise KeyError(f"unknown item: {name}")\n        if self.items[name] < quantity:\n            raise ValueError(f"only {self.items[name]} of {name} left")\n',
                    ),
                ],
            ),
            (
                "Write total as a single sum over the values.",
                [
                    (
                        "        total = 0\n        for name in self.items:\n            total += self.items[name]\n        return total",
                        "        return sum(self.items.values())",
                    ),
                ],
            ),
            (
                "Reject quantities below 1 in add.",
                [
                    (
                        "    def add(self, name: str, quantity: int) -> None:\n",
                        '    def add(self, name: str, quantity: int) -> None:\n        if quantity < 1:\n            raise ValueError(f"quantity must be >= 1 (got {quantity})")\n',
                    ),
                ],
            ),
            (
                "Add a docstring to each method.",
                [
                    (
                        "    def add(self, name: str, quantity: int) -> None:\n",
                        '    def add(self, name: str, quantity: int) -> None:\n        """Put quantity more of name in stock."""\n',
                    ),
                    (
                        "    def remove(self, name: str, quantity: int) -> None:\n",
                        '    def remove(self, name: str, quantity: int) -> None:\n        """Take quantity of name out of stock."""\n',
                    ),
                    (
                        "    def count(self, name: str) -> int:\n",
                        '    def count(self, name: str) -> int:\n        """How many of name are in stock."""\n',
                    ),
                    (
                        "    def total(self) -> int:\n",
                        '    def total(self) -> int:\n        """How many items are in stock altogether."""\n',
                    ),
                ],
            ),
            (
                "Drop an item from the dict when its count reaches zero in remove.",
                [
                    (
                        "        self.items[name] -= quantity\n",
                        "        self.items[name] -= quantity\n        if self.items[name] == 0:\n            del self.items[name]\n",
                    ),
                ],
            ),
            (
                "Add a names method returning the item names in sorted order.",
                [
                    (
                        "    def total(self) -> int:",
                        '    def names(self) -> list[str]:\n        """The names of the items in stock, sorted."""\n        return sorted(self.items)\n\n    def total(self) -> int:',
                    ),
                ],
            ),
        ],
    },
    {
        "name": "csv-report",
        "path": "report.py",
        "file": """import csv


def load(path):
    rows = []
    with open(path) as f:
        for row in csv.DictReader(f):
            rows.append(row)
    return rows


def totals_by_region(rows):
    totals = {}
    for row in rows:
        region = row["region"]
        amount = float(row["amount"])
        totals[region] = totals.get(region, 0) + amount
    return totals


def main(path):
    rows = load(path)
    totals = totals_by_region(rows)
    for region in totals:
        print(region, totals[region])


if __name__ == "__main__":
    import sys

    main(sys.argv[1])
""",
        "edits": [
            (
                "Open the file with encoding utf-8 and newline=''.",
                [
                    (
                        "    with open(path) as f:",
                        '    with open(path, encoding="utf-8", newline="") as f:',
                    ),
                ],
            ),
            (
                "Write load as a list comprehension over the reader.",
                [
                    (
                        '    rows = []\n    with open(path, encoding="utf-8", newline="") as f:\n        for row in csv.DictReader(f):\n            rows.append(row)\n    return rows',
                        '    with open(path, encoding="utf-8", newline="") as f:\n        return [row for row in csv.DictReader(f)]',
                    ),
                ],
            ),
            (
                "Print the regions sorted by total, largest first.",
                [
                    (
                        "    for region in totals:\n        print(region, totals[region])",
                        "    for region, total in sorted(totals.items(), key=lambda item: -item[1]):\n        print(region, total)",
                    ),
                ],
            ),
            (
                "Format the totals with two decimals, the region left-aligned in 12 characters.",
                [
                    ("        print(region, total)", '        print(f"{region:<12} {total:.2f}")'),
                ],
            ),
            (
                "Skip rows whose amount is empty.",
                [
                    (
                        '    for row in rows:\n        region = row["region"]\n',
                        '    for row in rows:\n        if not row["amount"]:\n            continue\n        region = row["region"]\n',
                    ),
                ],
            ),
            (
                "Add type hints.",
                [
                    ("def load(path):", "def load(path: str) -> list[dict[str, str]]:"),
                    (
                        "def totals_by_region(rows):\n    totals = {}",
                        "def totals_by_region(rows: list[dict[str, str]]) -> dict[str, float]:\n    totals: dict[str, float] = {}",
                    ),
                    ("def main(path):", "def main(path: str) -> None:"),
                    ("totals.get(region, 0) + amount", "totals.get(region, 0.0) + amount"),
                ],
            ),
            (
                "Print a TOTAL line after the regions.",
                [
                    (
                        '        print(f"{region:<12} {total:.2f}")\n',
                        '        print(f"{region:<12} {total:.2f}")\n    print(f"{\'TOTAL\':<12} {sum(totals.values()):.2f}")\n',
                    ),
                ],
            ),
            (
                "Add a module docstring.",
                [
                    (
                        "import csv\n",
                        '"""Sum a sales CSV (columns region, amount) by region."""\n\nimport csv\n',
                    ),
                ],
            ),
            (
                "Exit with a usage message when no path is given.",
                [
                    (
                        "    import sys\n\n    main(sys.argv[1])",
                        '    import sys\n\n    if len(sys.argv) != 2:\n        sys.exit("usage: python report.py SALES.csv")\n    main(sys.argv[1])',
                    ),
                ],
            ),
        ],
    },
    {
        "name": "rate-limiter",
        "path": "limiter.py",
        "file": '''import time


class RateLimiter:
    """Allow at most `rate` calls per `per` seconds."""

    def __init__(self, rate, per):
        self.rate = rate
        self.per = per
        self.allowance = rate
        self.last = time.time()

    def allow(self):
        now = time.time()
        elapsed = now - self.last
        self.last = now
        self.allowance += elapsed * (self.rate / self.per)
        if self.allowance > self.rate:
            self.allowance = self.rate
        if self.allowance < 1:
            return False
        self.allowance -= 1
        return True
''',
        "edits": [
            (
                "Use time.monotonic instead of time.time.",
                [
                    ("        self.last = time.time()", "        self.last = time.monotonic()"),
                    ("        now = time.time()", "        now = time.monotonic()"),
                ],
            ),
            (
                "Add type hints.",
                [
                    (
                        "    def __init__(self, rate, per):",
                        "    def __init__(self, rate: int, per: float) -> None:",
                    ),
                    ("    def allow(self):", "    def allow(self) -> bool:"),
                    ("        self.allowance = rate\n", "        self.allowance: float = rate\n"),
                ],
            ),
            (
                "Validate rate and per in __init__ with ValueError.",
                [
                    (
                        "    def __init__(self, rate: int, per: float) -> None:\n",
                        '    def __init__(self, rate: int, per: float) -> None:\n        if rate < 1:\n            raise ValueError(f"rate must be >= 1 (got {rate})")\n        if per <= 0:\n            raise ValueError(f"per must be > 0 (got {per})")\n',
                    ),
                ],
            ),
            (
                "Use min() to cap the allowance.",
                [
                    (
                        "        self.allowance += elapsed * (self.rate / self.per)\n        if self.allowance > self.rate:\n            self.allowance = self.rate",
                        "        self.allowance = min(self.rate, self.allowance + elapsed * (self.rate / self.per))",
                    ),
                ],
            ),
            (
                "Let the caller pass a clock function, defaulting to time.monotonic.",
                [
                    ("import time\n", "import time\nfrom collections.abc import Callable\n"),
                    (
                        "    def __init__(self, rate: int, per: float) -> None:",
                        "    def __init__(\n        self, rate: int, per: float, clock: Callable[[], float] = time.monotonic\n    ) -> None:",
                    ),
                    (
                        "        self.per = per\n",
                        "        self.per = per\n        self.clock = clock\n",
                    ),
                    ("        self.last = time.monotonic()", "        self.last = clock()"),
                    ("        now = time.monotonic()", "        now = self.clock()"),
                ],
            ),
            (
                "Add a wait_time method: seconds until the next call is allowed (0.0 if now).",
                [
                    (
                        "        self.allowance -= 1\n        return True\n",
                        "        self.allowance -= 1\n        return True\n\n    def wait_time(self) -> float:\n        if self.allowance >= 1:\n            return 0.0\n        return (1 - self.allowance) * self.per / self.rate\n",
                    ),
                ],
            ),
            (
                "Add docstrings to allow and wait_time.",
                [
                    (
                        "    def allow(self) -> bool:\n",
                        '    def allow(self) -> bool:\n        """True (and one call used up) if a call may go now."""\n',
                    ),
                    (
                        "    def wait_time(self) -> float:\n",
                        '    def wait_time(self) -> float:\n        """Seconds until allow() would return True."""\n',
                    ),
                ],
            ),
            (
                "Add a reset method that refills the allowance.",
                [
                    (
                        "    def wait_time(self) -> float:",
                        '    def reset(self) -> None:\n        """Refill the allowance, as if no call had been made."""\n        self.allowance = self.rate\n        self.last = self.clock()\n\n    def wait_time(self) -> float:',
                    ),
                ],
            ),
        ],
    },
]


def _apply(text: str, changes: list[tuple[str, str]], where: str) -> str:
    for old, new in changes:
        if text.count(old) != 1:
            raise ValueError(f"{where}: {old!r} occurs {text.count(old)} times")
        text = text.replace(old, new)
    return text


def code_requests() -> list[dict[str, Any]]:
    """One request per edit of each file, the conversation so far in the prompt."""
    rows = []
    for task in CODE_TASKS:
        text = task["file"]
        history = (
            f"{CODE_SYSTEM}\n\nUser: This is {task['path']}:\n```python\n{text}```\n"
            "I will ask for changes one at a time.\n\nAssistant: Ready.\n"
        )
        for step, (ask, changes) in enumerate(task["edits"]):
            prompt = f"{history}\nUser: {ask}\n\nAssistant:"
            rows.append(_row("agent-code", task["name"], step, prompt, 512))
            text = _apply(text, changes, f"{task['name']} step {step}")
            history += f"\nUser: {ask}\n\nAssistant:\n```python\n{text}```\n"
    return rows


# --- (c) SQL agent: one fixed schema, queries and their results ----------------------------------

SCHEMA = """CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, country TEXT, \
signup_date DATE);
CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT, category TEXT, price NUMERIC);
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER REFERENCES customers(id), \
order_date DATE, status TEXT);
CREATE TABLE order_items (order_id INTEGER REFERENCES orders(id), product_id INTEGER \
REFERENCES products(id), quantity INTEGER, unit_price NUMERIC);"""

SQL_SYSTEM = (
    "You are a data analyst with read access to a PostgreSQL database. Answer the user's "
    "questions by writing one SQL query per turn; the result comes back as a table. Reply "
    "with the query alone in a ```sql block, or with ANSWER: followed by the answer once you "
    "have it.\n\nSchema:\n" + SCHEMA
)

SQL_TASKS: list[dict[str, Any]] = [
    {
        "name": "revenue",
        "user": "How did revenue develop in the first quarter of 2025, and what drove it?",
        "steps": [
            (
                "SELECT date_trunc('month', o.order_date) AS month, SUM(oi.quantity * oi.unit_price) AS revenue\nFROM orders o\nJOIN order_items oi ON oi.order_id = o.id\nWHERE o.order_date >= '2025-01-01' AND o.order_date < '2025-04-01' AND o.status = 'completed'\nGROUP BY month\nORDER BY month;",
                "month      | revenue\n2025-01-01 | 184210.50\n2025-02-01 | 171940.20\n2025-03-01 | 229875.90",
            ),
            (
                "SELECT date_trunc('month', o.order_date) AS month, COUNT(DISTINCT o.id) AS orders, SUM(oi.quantity * oi.unit_price) / COUNT(DISTINCT o.id) AS avg_order_value\nFROM orders o\nJOIN order_items oi ON oi.order_id = o.id\nWHERE o.order_date >= '2025-01-01' AND o.order_date < '2025-04-01' AND o.status = 'completed'\nGROUP BY month\nORDER BY month;",
                "month      | orders | avg_order_value\n2025-01-01 | 2412   | 76.37\n2025-02-01 | 2290   | 75.08\n2025-03-01 | 2655   | 86.58",
            ),
            (
                "SELECT p.category, SUM(oi.quantity * oi.unit_price) AS revenue\nFROM orders o\nJOIN order_items oi ON oi.order_id = o.id\nJOIN products p ON p.id = oi.product_id\nWHERE o.order_date >= '2025-03-01' AND o.order_date < '2025-04-01' AND o.status = 'completed'\nGROUP BY p.category\nORDER BY revenue DESC;",
                "category    | revenue\noutdoor     | 81220.40\nkitchen     | 52310.10\nelectronics | 49880.00\nhome        | 30105.60\nbooks       | 16359.80",
            ),
            (
                "SELECT p.category, SUM(oi.quantity * oi.unit_price) AS revenue\nFROM orders o\nJOIN order_items oi ON oi.order_id = o.id\nJOIN products p ON p.id = oi.product_id\nWHERE o.order_date >= '2025-02-01' AND o.order_date < '2025-03-01' AND o.status = 'completed'\nGROUP BY p.category\nORDER BY revenue DESC;",
                "category    | revenue\nkitchen     | 50120.30\nelectronics | 48770.90\noutdoor     | 25840.00\nhome        | 29850.20\nbooks       | 17358.80",
            ),
            (
                "SELECT p.name, SUM(oi.quantity) AS units, SUM(oi.quantity * oi.unit_price) AS revenue\nFROM orders o\nJOIN order_items oi ON oi.order_id = o.id\nJOIN products p ON p.id = oi.product_id\nWHERE o.order_date >= '2025-03-01' AND o.order_date < '2025-04-01' AND o.status = 'completed' AND p.category = 'outdoor'\nGROUP BY p.name\nORDER BY revenue DESC\nLIMIT 5;",
                "name                 | units | revenue\nTrail tent 2p        | 210   | 31290.00\nHiking backpack 40 l | 305   | 21045.00\nCamping stove        | 268   | 11792.00\nSleeping bag 3-season| 122   | 10370.00\nHeadlamp 400 lm      | 311   | 6220.00",
            ),
            (
                "SELECT c.country, SUM(oi.quantity * oi.unit_price) AS revenue\nFROM orders o\nJOIN order_items oi ON oi.order_id = o.id\nJOIN products p ON p.id = oi.product_id\nJOIN customers c ON c.id = o.customer_id\nWHERE o.order_date >= '2025-03-01' AND o.order_date < '2025-04-01' AND o.status = 'completed' AND p.category = 'outdoor'\nGROUP BY c.country\nORDER BY revenue DESC;",
                "country | revenue\nDE      | 30110.20\nAT      | 19870.40\nCH      | 17320.00\nNL      | 13919.80",
            ),
            (
                "SELECT COUNT(*) AS new_customers\nFROM customers\nWHERE signup_date >= '2025-03-01' AND signup_date < '2025-04-01';",
                "new_customers\n1184",
            ),
            (
                "SELECT date_trunc('month', signup_date) AS month, COUNT(*) AS new_customers\nFROM customers\nWHERE signup_date >= '2024-10-01' AND signup_date < '2025-04-01'\nGROUP BY month\nORDER BY month;",
                "month      | new_customers\n2024-10-01 | 702\n2024-11-01 | 745\n2024-12-01 | 810\n2025-01-01 | 731\n2025-02-01 | 698\n2025-03-01 | 1184",
            ),
            (
                "ANSWER: Revenue fell from 184.2k in January to 171.9k in February, then rose to 229.9k in March. March grew on more orders (2655) and a higher average order (86.58). The outdoor category drove it: 81.2k in March against 25.8k in February, led by the 2-person trail tent, mostly in DE and AT, and March also brought 1184 new customers, far above the 700 to 810 of earlier months.",
                None,
            ),
        ],
    },
    {
        "name": "churn",
        "user": "Which customers who used to order regularly have stopped ordering? I need a list for a win-back campaign.",
        "steps": [
            (
                "SELECT customer_id, COUNT(*) AS orders_2024\nFROM orders\nWHERE order_date >= '2024-01-01' AND order_date < '2025-01-01' AND status = 'completed'\nGROUP BY customer_id\nHAVING COUNT(*) >= 4\nORDER BY orders_2024 DESC\nLIMIT 10;",
                "customer_id | orders_2024\n1043        | 14\n2210        | 12\n877         | 11\n3391        | 10\n512         | 9\n1966        | 9\n2874        | 8\n640         | 8\n3012        | 7\n1520        | 7",
            ),
            (
                "SELECT COUNT(*) AS regulars\nFROM (\n  SELECT customer_id\n  FROM orders\n  WHERE order_date >= '2024-01-01' AND order_date < '2025-01-01' AND status = 'completed'\n  GROUP BY customer_id\n  HAVING COUNT(*) >= 4\n) r;",
                "regulars\n1342",
            ),
            (
                "SELECT r.customer_id, MAX(o.order_date) AS last_order\nFROM (\n  SELECT customer_id\n  FROM orders\n  WHERE order_date >= '2024-01-01' AND order_date < '2025-01-01' AND status = 'completed'\n  GROUP BY customer_id\n  HAVING COUNT(*) >= 4\n) r\nJOIN orders o ON o.customer_id = r.customer_id AND o.status = 'completed'\nGROUP BY r.customer_id\nHAVING MAX(o.order_date) < '2025-01-01'\nORDER BY last_order\nLIMIT 10;",
                "customer_id | last_order\n2874        | 2024-08-14\n640         | 2024-09-02\n1520        | 2024-09-20\n3577        | 2024-10-03\n918         | 2024-10-11\n2245        | 2024-10-29\n3108        | 2024-11-05\n455         | 2024-11-18\n1789        | 2024-12-01\n2650        | 2024-12-09",
            ),
            (
                "SELECT COUNT(*) AS lapsed\nFROM (\n  SELECT r.customer_id\n  FROM (\n    SELECT customer_id\n    FROM orders\n    WHERE order_date >= '2024-01-01' AND order_date < '2025-01-01' AND status = 'completed'\n    GROUP BY customer_id\n    HAVING COUNT(*) >= 4\n  ) r\n  JOIN orders o ON o.customer_id = r.customer_id AND o.status = 'completed'\n  GROUP BY r.customer_id\n  HAVING MAX(o.order_date) < '2025-01-01'\n) l;",
                "lapsed\n187",
            ),
            (
                "SELECT c.country, COUNT(*) AS lapsed\nFROM (\n  SELECT r.customer_id\n  FROM (\n    SELECT customer_id\n    FROM orders\n    WHERE order_date >= '2024-01-01' AND order_date < '2025-01-01' AND status = 'completed'\n    GROUP BY customer_id\n    HAVING COUNT(*) >= 4\n  ) r\n  JOIN orders o ON o.customer_id = r.customer_id AND o.status = 'completed'\n  GROUP BY r.customer_id\n  HAVING MAX(o.order_date) < '2025-01-01'\n) l\nJOIN customers c ON c.id = l.customer_id\nGROUP BY c.country\nORDER BY lapsed DESC;",
                "country | lapsed\nDE      | 74\nNL      | 48\nAT      | 39\nCH      | 26",
            ),
            (
                "SELECT p.category, COUNT(DISTINCT o.customer_id) AS lapsed_buyers\nFROM (\n  SELECT r.customer_id\n  FROM (\n    SELECT customer_id\n    FROM orders\n    WHERE order_date >= '2024-01-01' AND order_date < '2025-01-01' AND status = 'completed'\n    GROUP BY customer_id\n    HAVING COUNT(*) >= 4\n  ) r\n  JOIN orders o ON o.customer_id = r.customer_id AND o.status = 'completed'\n  GROUP BY r.customer_id\n  HAVING MAX(o.order_date) < '2025-01-01'\n) l\nJOIN orders o ON o.customer_id = l.customer_id AND o.status = 'completed'\nJOIN order_items oi ON oi.order_id = o.id\nJOIN products p ON p.id = oi.product_id\nGROUP BY p.category\nORDER BY lapsed_buyers DESC;",
                "category    | lapsed_buyers\nkitchen     | 131\nhome        | 102\nbooks       | 77\nelectronics | 45\noutdoor     | 18",
            ),
            (
                "SELECT o.status, COUNT(*) AS orders\nFROM orders o\nWHERE o.customer_id IN (2874, 640, 1520, 3577, 918, 2245, 3108, 455, 1789, 2650)\nGROUP BY o.status;",
                "status    | orders\ncompleted | 79\nreturned  | 11\ncancelled | 6",
            ),
            (
                "SELECT c.id, c.name, c.country, MAX(o.order_date) AS last_order, COUNT(o.id) AS orders_2024\nFROM customers c\nJOIN orders o ON o.customer_id = c.id AND o.status = 'completed'\nWHERE c.id IN (\n  SELECT r.customer_id\n  FROM (\n    SELECT customer_id\n    FROM orders\n    WHERE order_date >= '2024-01-01' AND order_date < '2025-01-01' AND status = 'completed'\n    GROUP BY customer_id\n    HAVING COUNT(*) >= 4\n  ) r\n  JOIN orders o2 ON o2.customer_id = r.customer_id AND o2.status = 'completed'\n  GROUP BY r.customer_id\n  HAVING MAX(o2.order_date) < '2025-01-01'\n)\nGROUP BY c.id, c.name, c.country\nORDER BY orders_2024 DESC, last_order\nLIMIT 20;",
                "id   | name             | country | last_order | orders_2024\n2874 | Jana Novak       | AT      | 2024-08-14 | 8\n640  | Pieter de Vries  | NL      | 2024-09-02 | 8\n1520 | Lukas Meier      | CH      | 2024-09-20 | 7\n3577 | Sophie Wagner    | DE      | 2024-10-03 | 6\n918  | Emma Jansen      | NL      | 2024-10-11 | 6",
            ),
            (
                "ANSWER: 187 of the 1342 customers with 4 or more completed orders in 2024 have not ordered since January 1, 2025, most of them in DE (74) and NL (48), and most bought kitchen and home goods. The list above (id, name, country, last order, 2024 orders) starts with Jana Novak, Pieter de Vries and Lukas Meier; the full query returns all 187 for the campaign.",
                None,
            ),
        ],
    },
    {
        "name": "returns",
        "user": "Returns seem to be up. Which products are returned most, and is it getting worse?",
        "steps": [
            (
                "SELECT date_trunc('month', order_date) AS month, COUNT(*) FILTER (WHERE status = 'returned') AS returned, COUNT(*) AS orders\nFROM orders\nWHERE order_date >= '2024-10-01' AND order_date < '2025-04-01'\nGROUP BY month\nORDER BY month;",
                "month      | returned | orders\n2024-10-01 | 101      | 2350\n2024-11-01 | 118      | 2611\n2024-12-01 | 162      | 3320\n2025-01-01 | 149      | 2530\n2025-02-01 | 171      | 2415\n2025-03-01 | 233      | 2820",
            ),
            (
                "SELECT p.name, p.category, COUNT(*) AS returns\nFROM orders o\nJOIN order_items oi ON oi.order_id = o.id\nJOIN products p ON p.id = oi.product_id\nWHERE o.status = 'returned' AND o.order_date >= '2025-01-01' AND o.order_date < '2025-04-01'\nGROUP BY p.name, p.category\nORDER BY returns DESC\nLIMIT 10;",
                "name                  | category    | returns\nWireless earbuds X2   | electronics | 96\nTrail tent 2p         | outdoor     | 41\nSmart plug (2-pack)   | electronics | 33\nChef knife 20 cm      | kitchen     | 24\nDesk lamp LED         | home        | 22",
            ),
            (
                "SELECT p.name, COUNT(*) FILTER (WHERE o.status = 'returned') AS returned, COUNT(*) AS sold, ROUND(100.0 * COUNT(*) FILTER (WHERE o.status = 'returned') / COUNT(*), 1) AS return_rate\nFROM orders o\nJOIN order_items oi ON oi.order_id = o.id\nJOIN products p ON p.id = oi.product_id\nWHERE o.order_date >= '2025-01-01' AND o.order_date < '2025-04-01' AND o.status IN ('completed', 'returned')\nGROUP BY p.name\nHAVING COUNT(*) >= 100\nORDER BY return_rate DESC\nLIMIT 10;",
                "name                | returned | sold | return_rate\nWireless earbuds X2 | 96       | 402  | 23.9\nSmart plug (2-pack) | 33       | 310  | 10.6\nTrail tent 2p       | 41       | 455  | 9.0\nDesk lamp LED       | 22       | 298  | 7.4\nChef knife 20 cm    | 24       | 351  | 6.8",
            ),
            (
                "SELECT date_trunc('month', o.order_date) AS month, COUNT(*) FILTER (WHERE o.status = 'returned') AS returned, COUNT(*) AS sold\nFROM orders o\nJOIN order_items oi ON oi.order_id = o.id\nJOIN products p ON p.id = oi.product_id\nWHERE p.name = 'Wireless earbuds X2' AND o.order_date >= '2024-10-01' AND o.order_date < '2025-04-01' AND o.status IN ('completed', 'returned')\nGROUP BY month\nORDER BY month;",
                "month      | returned | sold\n2024-10-01 | 4        | 88\n2024-11-01 | 5        | 97\n2024-12-01 | 7        | 140\n2025-01-01 | 19       | 121\n2025-02-01 | 31       | 130\n2025-03-01 | 46       | 151",
            ),
            (
                "SELECT oi.unit_price, COUNT(*) FILTER (WHERE o.status = 'returned') AS returned, COUNT(*) AS sold\nFROM orders o\nJOIN order_items oi ON oi.order_id = o.id\nJOIN products p ON p.id = oi.product_id\nWHERE p.name = 'Wireless earbuds X2' AND o.order_date >= '2024-10-01' AND o.order_date < '2025-04-01' AND o.status IN ('completed', 'returned')\nGROUP BY oi.unit_price\nORDER BY oi.unit_price;",
                "unit_price | returned | sold\n49.99      | 87       | 378\n59.99      | 25       | 349",
            ),
            (
                "SELECT MIN(o.order_date) AS first_sold_at_4999\nFROM orders o\nJOIN order_items oi ON oi.order_id = o.id\nJOIN products p ON p.id = oi.product_id\nWHERE p.name = 'Wireless earbuds X2' AND oi.unit_price = 49.99;",
                "first_sold_at_4999\n2025-01-06",
            ),
            (
                "SELECT c.country, COUNT(*) FILTER (WHERE o.status = 'returned') AS returned, COUNT(*) AS sold\nFROM orders o\nJOIN order_items oi ON oi.order_id = o.id\nJOIN products p ON p.id = oi.product_id\nJOIN customers c ON c.id = o.customer_id\nWHERE p.name = 'Wireless earbuds X2' AND o.order_date >= '2025-01-01' AND o.order_date < '2025-04-01' AND o.status IN ('completed', 'returned')\nGROUP BY c.country\nORDER BY returned DESC;",
                "country | returned | sold\nDE      | 41       | 170\nNL      | 24       | 98\nAT      | 19       | 82\nCH      | 12       | 52",
            ),
            (
                "SELECT date_trunc('month', o.order_date) AS month, COUNT(*) FILTER (WHERE o.status = 'returned') AS returned, COUNT(*) AS orders\nFROM orders o\nWHERE o.order_date >= '2024-10-01' AND o.order_date < '2025-04-01' AND o.id NOT IN (\n  SELECT oi.order_id\n  FROM order_items oi\n  JOIN products p ON p.id = oi.product_id\n  WHERE p.name = 'Wireless earbuds X2'\n)\nGROUP BY month\nORDER BY month;",
                "month      | returned | orders\n2024-10-01 | 97       | 2262\n2024-11-01 | 113      | 2514\n2024-12-01 | 155      | 3180\n2025-01-01 | 130      | 2409\n2025-02-01 | 140      | 2285\n2025-03-01 | 187      | 2669",
            ),
            (
                "ANSWER: Returns rose from 4.3% of orders in October to 8.3% in March. The Wireless earbuds X2 stand out: returned 23.9% of the time this quarter, up from about 5% in late 2024, and the rise starts with the cheaper 49.99 version first sold on January 6, 2025, in every country alike. Without the earbuds the return rate still climbs, from 4.3% to 7.0%, so the tent and the smart plug are worth a look next.",
                None,
            ),
        ],
    },
]


def sql_requests() -> list[dict[str, Any]]:
    """One request per analyst turn of each SQL task."""
    rows = []
    for task in SQL_TASKS:
        history = f"{SQL_SYSTEM}\n\nUser: {task['user']}\n"
        for step, (query, result) in enumerate(task["steps"]):
            prompt = f"{history}\nAssistant:"
            rows.append(_row("agent-sql", task["name"], step, prompt, 256))
            if result is None:
                break
            history += f"\nAssistant:\n```sql\n{query}\n```\n\nResult:\n{result}\n"
    return rows


def _row(workload: str, task: str, step: int, prompt: str, new_tokens: int) -> dict[str, Any]:
    """One request of a workload, marked with its task and step."""
    return {
        "id": f"{workload}-{task}-{step:02d}",
        "category": workload,
        "prompt": prompt,
        "max_new_tokens": new_tokens,
        "temperature": 0.0,
        "task": task,
        "step": step,
    }


def workloads() -> dict[str, str]:
    """Each agent workload's JSONL text by name."""
    return {
        name: "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
        for name, rows in (
            ("agent-tools", tool_requests()),
            ("agent-code", code_requests()),
            ("agent-sql", sql_requests()),
        )
    }


def main() -> int:
    """Write the three workload files, or with --check compare them with the scripts."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=OUT, help="the folder to write (%(default)s)")
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 on a difference"
    )
    args = parser.parse_args()
    if not args.out.is_dir():
        parser.error(f"no folder {args.out}: give --out an existing folder")
    stale = []
    for name, text in workloads().items():
        path = args.out / f"{name}.jsonl"
        if args.check:
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                stale.append(str(path))
        else:
            path.write_text(text, encoding="utf-8")
    if stale:
        print(
            f"differ from the scripts (rerun without --check): {', '.join(stale)}", file=sys.stderr
        )
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
