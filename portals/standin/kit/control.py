"""Form controls of the stand-ins, including the ones faults change.

The ``changed_selector`` fault renames the submit control (as after a portal redesign);
the ``dialog`` fault adds an alert on load (US family) or a confirm() before submitting.
Canadian pages use plain forms with a submit button; US pages an ``<a role=button>``
that submits the step form from script.
"""

from __future__ import annotations

from typing import Any

from portalq.portals.standin.kit.html import esc
from portalq.portals.standin.kit.state import PortalState

# ---- Canadian registries: labelled fields and a submit button ---------------------------


def alert(code: str, message: str) -> str:
    return f'<div role="alert" class="error" data-code="{esc(code)}">{esc(message)}</div>'


def field(label: str, name: str, value: Any = "", *, kind: str = "text") -> str:
    return (f'<div class="field"><label for="f-{name}">{esc(label)}</label> <input '
            f'type="{kind}" id="f-{name}" name="{name}" value="{esc(value)}"></div>')


def checkbox(label: str, name: str, value: str = "on", checked: bool = False,
             kind: str = "checkbox") -> str:
    ident = f"f-{name}-{value}"
    mark = " checked" if checked else ""
    return (f'<div class="choice"><input type="{kind}" id="{ident}" name="{name}" '
            f'value="{esc(value)}"{mark}> <label for="{ident}">{esc(label)}</label></div>')


def radio(label: str, name: str, value: str, current: Any) -> str:
    return checkbox(label, name, value, current == value, kind="radio")


def select(label: str, name: str, options: dict[str, str], current: Any = None) -> str:
    opts = "".join(f'<option value="{esc(k)}"{" selected" if k == current else ""}>{esc(v)}'
                   "</option>" for k, v in options.items())
    return (f'<div class="field"><label for="f-{name}">{esc(label)}</label> '
            f'<select id="f-{name}" name="{name}">{opts}</select></div>')


def search_form(action: str, label: str, name: str, value: str) -> str:
    """A GET search by one field (a filer's reference)."""
    return (f'<form method="get" action="{action}">' + field(label, name, value)
            + '<button type="submit">Search</button></form>')


def form(action: str, inner: str, button: str, state: PortalState, *, renamed: str,
         multipart: bool = False) -> str:
    """A POST form whose submit button is ``button`` — or ``renamed`` while the
    ``changed_selector`` fault is on; the ``dialog`` fault adds a confirm() on submit
    (dismissing it, as a browser does by default with no handler, blocks the form)."""
    enctype = ' enctype="multipart/form-data"' if multipart else ""
    confirm = ""
    if state.faults.dialog:
        confirm = (' onsubmit="return confirm(\'Your session will time out after 30 minutes'
                   ' of inactivity. Continue?\')"')
    if state.faults.changed_selector:
        btn = f'<button type="submit" class="btn-next" data-v="2">{esc(renamed)}</button>'
    else:
        btn = f'<button type="submit" class="btn-primary">{esc(button)}</button>'
    return f'<form method="post" action="{action}"{enctype}{confirm}>{inner}{btn}</form>'


# ---- US filing systems: an <a role=button> that submits the step form --------------------


def dialog_script(state: PortalState) -> str:
    """With the ``dialog`` fault: an alert on load, and a confirm before Continue."""
    if not state.faults.dialog:
        return "const CONFIRM = () => true;"
    return ("window.addEventListener('load', () => alert('Notice: expect longer response "
            "times today.'));\nconst CONFIRM = () => confirm('Are you sure you want to "
            "continue? Changes cannot be undone.');")


# submits the form from the JS state (the <a role=button> is not a form control)
SUBMIT_JS = """document.querySelectorAll('a.go').forEach(a => a.addEventListener('click', ev => {
  ev.preventDefault(); if (!CONFIRM()) return; document.querySelector('form.step').submit(); }));
"""
