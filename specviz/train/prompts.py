"""Training prompts for the target's own answers: templated chat requests and corpus-derived tasks.

The held-out evaluation prompts live in ``specviz.train.evaluate`` and share no template with these.
"""

from __future__ import annotations

import ast
import re

import torch

from specviz.train.corpus import load_docs

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
