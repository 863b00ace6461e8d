"""Secret values kept out of what a flow leaves behind: screenshots masked by value (in
every frame) and by selector; text redacted in every written form of a secret.

Used by the evidence of a flow (portals/flows/base.py) and by tracing
(portals/flows/browser.py), so it imports neither.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from contextlib import suppress
from pathlib import Path
from typing import Any

#: elements masked in every screenshot (stand-ins mark sensitive output with data-sensitive)
SENSITIVE_SELECTOR = (
    "[data-sensitive], input[type=password], input[name*=ssn i], input[name*=itin i]"
)


def secret_forms(secrets: Iterable[str]) -> list[str]:
    """Every written form of the secrets: as given, and for a 9-digit number (SSN, ITIN,
    EIN) digits only, dashed and spaced; longest first."""
    forms: set[str] = set()
    for secret in secrets:
        if not secret:
            continue
        forms.add(secret)
        digits = re.sub(r"\D", "", secret)
        if len(digits) == 9:
            forms |= {digits, f"{digits[:3]}-{digits[3:5]}-{digits[5:]}",
                      f"{digits[:3]} {digits[3:5]} {digits[5:]}"}
    return sorted(forms, key=len, reverse=True)


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret (and its digits-only / dashed forms) replaced by ***."""
    for form in secret_forms(secrets):
        text = text.replace(form, "***")
    return text


MASK_ATTR = "data-portalq-mask"

# Two steps, so that the secrets themselves are never sent to the page (nor recorded in a
# trace as an evaluate argument): the page lists its elements -- attribute values, input
# value and options, whitespace-normalised text, parent -- and keeps them; Python finds
# those showing a secret; the page marks them (MASK_ATTR) by position in its kept list.
_COLLECT_JS = """(deep) => {
  const norm = s => (s || '').replace(/[\\s\\u00a0]+/g, ' ');
  // the text of an element's generated content (::before/::after/::marker content, a
  // list-style-type string): its strings joined (a secret may be written as two
  // strings), and the value as given (attr(), counter())
  const generated = el => {
    const texts = [];
    const values = [getComputedStyle(el, '::before').content,
                    getComputedStyle(el, '::after').content];
    const style = getComputedStyle(el);
    if (style.display === 'list-item')
      values.push(style.listStyleType, getComputedStyle(el, '::marker').content);
    for (const c of values) {
      if (!c || !/["(]/.test(c)) continue;
      const strings = Array.from(c.matchAll(/"((?:[^"\\\\]|\\\\.)*)"/g),
                                 m => m[1].replace(/\\\\(.)/g, '$1'));
      texts.push(strings.join(''), c);
    }
    return texts;
  };
  const els = [], out = [], pos = new Map();
  const visit = (root, parent) => {
    for (const el of root.querySelectorAll('*')) {
      if (['SCRIPT', 'STYLE', 'TEMPLATE'].includes(el.tagName)) continue;
      const parts = Array.from(el.attributes, a => a.value);
      if ('value' in el && typeof el.value === 'string') parts.push(el.value);
      if (el.tagName === 'SELECT') parts.push(...Array.from(el.options, o => o.text));
      if (deep) parts.push(...generated(el));
      let up = el.parentElement, p = parent;
      while (up) { if (pos.has(up)) { p = pos.get(up); break; } up = up.parentElement; }
      pos.set(el, els.length);
      els.push(el);
      out.push([norm(parts.join('\\n')), norm(el.textContent), p]);
      if (el.shadowRoot) visit(el.shadowRoot, els.length - 1);
    }
  };
  visit(document, -1);
  window.__portalqMaskables = els;
  return out;
}"""
_MARK_JS = """([indices, attr]) => {
  const els = window.__portalqMaskables || [];
  delete window.__portalqMaskables;
  for (const i of indices) if (els[i]) els[i].setAttribute(attr, '');
  return indices.length;
}"""
_UNMARK_JS = """(attr) => {
  const visit = root => { for (const el of root.querySelectorAll('*')) {
    el.removeAttribute(attr);
    if (el.shadowRoot) visit(el.shadowRoot);
  } };
  visit(document);
}"""

# Masked elements' generated content is hidden too: a ::before/::after placed outside its
# element's box (position: absolute), or a list's ::marker (outside the box by default),
# would escape the mask's overlay. ``visibility`` keeps the layout as it is.
_MASK_STYLE = (
    f"[{MASK_ATTR}]::before, [{MASK_ATTR}]::after {{ visibility: hidden !important; }}"
    f" [{MASK_ATTR}]::marker, [{MASK_ATTR}] ::marker {{ color: transparent !important; }}")


def _to_mask(elements: list[list[Any]], forms: list[str]) -> list[int]:
    """Positions of the elements to mask: any whose attributes or value show a form, and
    the innermost ones whose text does (a parent only when no child holds it whole)."""
    def shows(text: str) -> bool:
        return any(f in text for f in forms)

    text_hit = [shows(text) for _parts, text, _parent in elements]
    has_hit_child = set()
    for i, (_parts, _text, parent) in enumerate(elements):
        if text_hit[i] and parent >= 0:
            has_hit_child.add(parent)
    return [i for i, (parts, _text, _parent) in enumerate(elements)
            if shows(parts) or (text_hit[i] and i not in has_hit_child)]


#: for the live view (portals/flows/live.py), which marks the same elements its own way
COLLECT_JS, to_mask = _COLLECT_JS, _to_mask


class FrameUnreadable(Exception):
    """A frame of the page could not be checked for secret values: no screenshot."""


async def mark_secrets(page: Any, secrets: Iterable[str]) -> list[Any]:
    """Mark, in every frame of ``page``, the elements showing a secret value in any written
    form; the locators to mask. Raises :class:`FrameUnreadable` when a frame cannot be
    read (navigating, crashed, detached): its content is then unknown."""
    forms = secret_forms(secrets)
    masks = [page.locator(SENSITIVE_SELECTOR)]
    for frame in page.frames:
        try:
            elements = await frame.evaluate(_COLLECT_JS, bool(forms))
            await frame.evaluate(_MARK_JS, [_to_mask(elements, forms), MASK_ATTR])
        except Exception as exc:  # noqa: BLE001 - any failure: cannot prove it clean
            raise FrameUnreadable(f"frame {frame.name or frame.url[:60]!r}: "
                                  f"{type(exc).__name__}") from None
        masks.append(frame.locator(f"[{MASK_ATTR}]"))
        if forms:
            # what a canvas draws cannot be read as text: with secrets about, every canvas
            # is masked whole
            masks.append(frame.locator("canvas"))
    if forms:
        try:
            await _mark_closed_hosts(page, forms)
        except Exception as exc:  # noqa: BLE001 - any failure: cannot prove it clean
            raise FrameUnreadable(f"closed shadow roots: {type(exc).__name__}") from None
    return masks


# Closed shadow roots: the page's scripts (ours included) cannot see inside them, and
# Playwright's locators pierce open ones only. Forcing attachShadow to open mode with an
# init script was considered and not done: it changes what a real portal's own scripts
# see (``el.shadowRoot`` no longer null), on a page the flow drives, and it misses roots
# the parser builds from markup (<template shadowrootmode=closed>), which call no script.
# The DevTools protocol sees every root without touching the page: its DOM (pierce=true)
# is read and the host outside all closed roots of any closed root showing a secret (or
# holding a canvas) is marked, so its whole box is masked. Only when secrets are given,
# so screenshots without any are not slowed.

def _closed_hosts(node: dict[str, Any], forms: list[str], host: dict[str, Any] | None,
                  found: list[int]) -> list[str]:
    """The text under ``node`` (text nodes and attribute values); appends to ``found``
    the hosts (outermost, outside every closed root) of closed roots showing a form."""
    texts: list[str] = []
    if node.get("nodeType") == 3:
        texts.append(node.get("nodeValue", ""))
    attributes = node.get("attributes", [])
    texts.extend(attributes[1::2])
    if host is not None and (node.get("nodeName") == "CANVAS" or node.get("pseudoElements")):
        # in a closed root, what cannot be read as text (a canvas's drawing, generated
        # content) counts as showing a secret: its host is masked
        texts.append(forms[0])
    for root in node.get("shadowRoots", []):
        closed = root.get("shadowRootType") == "closed"
        inner = _closed_hosts(root, forms, host or (node if closed else None), found)
        texts.extend(inner)
        if closed and host is None:
            text = re.sub(r"[\s\u00a0]+", " ", "".join(inner))
            if any(f in text for f in forms):
                found.append(node["nodeId"])
    for child in node.get("children", []):
        texts.extend(_closed_hosts(child, forms, host, found))
    if "contentDocument" in node:       # a frame's document: its own text, its own hosts
        _closed_hosts(node["contentDocument"], forms, None, found)
    return texts


async def _mark_closed_hosts(page: Any, forms: list[str], *, mark: bool = True) -> int:
    """How many closed roots of ``page`` show a form; their hosts marked if ``mark``."""
    session = await page.context.new_cdp_session(page)
    try:
        document = await session.send("DOM.getDocument", {"depth": -1, "pierce": True})
        found: list[int] = []
        _closed_hosts(document["root"], forms, None, found)
        for node_id in found if mark else ():
            await session.send("DOM.setAttributeValue",
                               {"nodeId": node_id, "name": MASK_ATTR, "value": ""})
        return len(found)
    finally:
        await session.detach()


async def page_shows(page: Any, secrets: Iterable[str]) -> bool:
    """True if ``page`` shows a secret where screenshots would mask it (an element's text,
    attributes, value or generated content, a closed shadow root, in every frame), or holds
    a canvas (unreadable); True as well when it cannot be read. For tracing, which records
    the page unmasked."""
    forms = secret_forms(secrets)
    if not forms:
        return False
    try:
        for frame in page.frames:
            elements = await frame.evaluate(_COLLECT_JS, True)
            await frame.evaluate(_MARK_JS, [[], MASK_ATTR])   # drops the page's kept list
            if _to_mask(elements, forms) or await frame.locator("canvas").count():
                return True
        return await _mark_closed_hosts(page, forms, mark=False) > 0
    except Exception:  # noqa: BLE001 - navigating or crashed: cannot prove it clean
        return True


async def unmark_secrets(page: Any) -> None:
    for frame in page.frames:
        with suppress(Exception):
            await frame.evaluate(_UNMARK_JS, MASK_ATTR)


async def masked_screenshot(page: Any, path: Path, secrets: Iterable[str]) -> bool:
    """A full-page screenshot with every secret masked (by value in every frame, and by
    :data:`SENSITIVE_SELECTOR`). When a frame cannot be read, no screenshot is taken:
    raises :class:`FrameUnreadable` (the caller records missing evidence)."""
    masks = await mark_secrets(page, secrets)
    try:
        await page.screenshot(path=str(path), full_page=True, mask=masks, style=_MASK_STYLE)
    finally:
        await unmark_secrets(page)
    return True
