"""Training prompts for the target's own answers: templated chat requests and corpus-derived tasks.

The held-out evaluation prompts live in ``specviz.train.draft.evaluate`` and share no template with
these.
"""

from __future__ import annotations

import ast
import re

import torch

from specviz.train.data.corpus import load_docs

TOPICS = (
    "learning a new language",
    "sleeping better",
    "saving money",
    "writing clean code",
    "cooking rice",
    "the water cycle",
    "photosynthesis",
    "black holes",
    "the French Revolution",
    "volcanoes",
    "climate change",
    "machine learning",
    "recursion",
    "public speaking",
    "time management",
    "the Roman Empire",
    "healthy breakfasts",
    "job interviews",
    "electric cars",
    "the moon landing",
    "gardening tomatoes",
    "unit testing",
    "databases",
    "the internet",
    "vaccines",
    "bees",
    "the stock market",
    "meditation",
    "chess openings",
    "renewable energy",
    "dinosaurs",
    "the human heart",
    "version control with git",
    "remote work",
    "the periodic table",
    "ancient Egypt",
    "learning to swim",
    "rainbows",
    "inflation",
    "sorting algorithms",
    "coffee",
    "earthquakes",
    "the solar system",
    "writing a resume",
    "hash tables",
    "team sports",
    "the ocean",
    "friendship",
    "music theory",
    "Linux",
    "regular expressions",
    "the Renaissance",
    "tea",
    "mountains",
    "running a marathon",
    "encryption",
    "cats",
    "dogs",
    "airplanes",
    "bread baking",
)
CHAT_TEMPLATES = (
    "What is {t}?",
    "Explain {t} to a ten-year-old.",
    "Give me three tips about {t}.",
    "Write a short poem about {t}.",
    "Tell me an interesting fact about {t}.",
    "Why is {t} important?",
    "Write a short paragraph about {t}.",
    "What are the pros and cons of {t}?",
    "Can you summarize the history of {t}?",
    "List five key ideas related to {t}.",
    "How would you explain {t} in one sentence?",
    "Write a tweet about {t}.",
    "What questions should a beginner ask about {t}?",
    "Describe {t} in simple words.",
)
CODE_TASKS = (
    "reverses a linked list",
    "counts the vowels in a string",
    "returns the n-th Fibonacci number",
    "checks whether a string is a palindrome",
    "merges two dictionaries",
    "flattens a nested list",
    "finds the maximum value in a list without using max",
    "removes duplicates from a list",
    "computes the factorial of a number",
    "reads a CSV file and returns the rows",
    "converts Celsius to Fahrenheit",
    "sorts a list of tuples by the second element",
    "counts word frequencies in a text",
    "checks if two strings are anagrams",
    "implements binary search",
    "returns the prime numbers below n",
    "transposes a matrix",
    "validates an email address with a regular expression",
    "computes the mean and median",
    "parses a date string",
    "implements a stack class",
    "implements a queue with two stacks",
    "computes the greatest common divisor",
    "capitalizes every word in a sentence",
    "finds the longest word in a sentence",
    "rotates a list by k positions",
)
CODE_TEMPLATES = (
    "Write a Python function that {c}.",
    "How do I write code that {c} in Python?",
    "Show me a Python function which {c}, with a docstring.",
    "Implement a function that {c}.",
    "Write a short Python script that {c} and explain it.",
    "Write JavaScript code that {c}.",
)


def _function_prompts(source: str) -> list[str]:
    """Prompts asking for stdlib functions that have a docstring."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    prompts = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            doc = ast.get_docstring(node)
            if doc and 20 < len(doc.splitlines()[0]) < 160:
                line = doc.splitlines()[0].rstrip(".")
                prompts.append(f"Write a Python function `{node.name}` that does this: {line}.")
    return prompts


def _prose_prompts(text: str) -> list[str]:
    """Summarise/explain prompts built from documentation paragraphs."""
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text)]
    good = [p for p in paragraphs if 200 < len(p) < 700 and p[0].isalpha() and "::" not in p]
    verbs = ("Summarize this paragraph:", "Explain this in simple terms:", "What does this mean?")
    return [f"{verbs[i % 3]}\n\n{p}" for i, p in enumerate(good)]


def training_prompts(generator: torch.Generator) -> list[str]:
    """All training prompts, shuffled with ``generator``; templated ones weighted 5x."""
    templated = [t.format(t=topic) for t in CHAT_TEMPLATES for topic in TOPICS]
    templated += [t.format(c=c) for t in CODE_TEMPLATES for c in CODE_TASKS]
    prompts = templated * 5
    for doc in load_docs():
        maker = _function_prompts if doc["kind"] == "code" else _prose_prompts
        prompts += maker(doc["text"])
    order = torch.randperm(len(prompts), generator=generator).tolist()
    return [prompts[i] for i in order]


JSON_THINGS = (
    "a city you would like to visit",
    "a fictional book",
    "a pet adoption listing",
    "a laptop for sale",
    "a weekly workout plan",
    "a recipe for soup",
    "a concert ticket",
    "an employee record",
    "a movie you like",
    "a hotel booking",
    "a planet",
    "a board game",
)
JSON_KEYS = (
    "name, type, price",
    "title, year, rating, tags",
    "id, name, email, active",
    "name, country, population, languages",
    "title, steps, minutes",
)
STORY_OPENINGS = (
    "Once upon a time, a young {t} enthusiast",
    "The first thing you should know about {t} is that",
    "It was a quiet morning when I first learned about {t}, and",
    "Here is a short essay on {t}.\n\n",
    "My grandmother always said that {t}",
)


def _stub_prompts(source: str) -> list[str]:
    """A stdlib function's signature and docstring, for the target to complete."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    lines, stubs = source.splitlines(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and ast.get_docstring(node) and node.body:
            doc = node.body[0]
            if doc.end_lineno and doc.end_lineno - node.lineno < 12 and node.col_offset == 0:
                stubs.append("\n".join(lines[node.lineno - 1 : doc.end_lineno]) + "\n")
    return stubs


def workload_style_prompts(docs: list[dict[str, str]], generator: torch.Generator) -> list[str]:
    """Requests in the styles a benchmark sends: code stubs, JSON to fill in, text to continue."""
    prompts = [p for d in docs if d["kind"] == "code" for p in _stub_prompts(d["text"])]
    keep = torch.randperm(len(prompts), generator=generator)[:3000].tolist()
    prompts = [prompts[i] for i in keep]
    for thing in JSON_THINGS:
        for keys in JSON_KEYS:
            head = '{"' + keys.split(",")[0] + '":'
            prompts += [f"Describe {thing} as JSON with keys {keys}.\n{head}"] * 2
            prompts.append(f"Give {thing} as a JSON object ({keys}).")
    prompts += [s.format(t=t) for s in STORY_OPENINGS for t in TOPICS] * 2
    return prompts
