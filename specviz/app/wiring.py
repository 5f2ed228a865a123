"""Gradio callbacks taking the form's values by name, and event outputs by name.

A callback's signature lists its inputs' names, so that Gradio's API takes the values by them
(the API's parameter names are the widget names); its handler gets them parsed. An event's
outputs are a tuple of component names: `outputs(names, ...)` gives the values in that order,
every output not named left as it is.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import gradio as gr

from specviz.app.session import NO_PROGRESS
from specviz.app.views.form import Settings, settings_from

# api_name of an event kept out of the API: Gradio takes False (its annotations: str | None)
NO_API: Any = False


def outputs(names: Sequence[str], **values: Any) -> list[Any]:
    """The values of an event whose outputs are the components called names, in that order:
    each named one's value, gr.skip() (left as it is) for the rest; KeyError for a name that is
    not an output."""
    if unknown := sorted(set(values) - set(names)):
        raise KeyError(f"not outputs of this event: {unknown}")
    return [values[name] if name in values else gr.skip() for name in names]


def callback(
    handler: Callable[..., Any],
    names: Sequence[str],
    read: Callable[[dict[str, Any]], tuple[Any, ...]],
    bad: Callable[[ValueError], Any],
) -> Callable[..., Any]:
    """A Gradio callback taking the widget values called names (its inputs, in that order) and
    progress: read turns them, by name, into the handler's arguments (a ValueError: bad(error)
    is the output instead), and the handler gets those and progress.

    The callback's signature lists the names, so Gradio's API takes the values by them too.
    """
    params = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names]
    params.append(
        inspect.Parameter("progress", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=NO_PROGRESS)
    )
    signature = inspect.Signature(params)

    def arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], Any]:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        values = dict(bound.arguments)
        progress = values.pop("progress")
        return read(values), progress

    if inspect.isgeneratorfunction(handler):

        def stream(*args: Any, **kwargs: Any) -> Iterator[Any]:
            try:
                parsed, progress = arguments(args, kwargs)
            except ValueError as err:
                yield bad(err)
                return
            yield from handler(*parsed, progress=progress)

        fn: Callable[..., Any] = stream
    else:

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                parsed, progress = arguments(args, kwargs)
            except ValueError as err:
                return bad(err)
            return handler(*parsed, progress=progress)

        fn = call
    fn.__signature__ = signature  # type: ignore[attr-defined]
    return fn


def form_only(values: Mapping[str, Any]) -> tuple[Settings]:
    """The handler arguments of an event that reads the form alone: its Settings."""
    return (settings_from(values),)
