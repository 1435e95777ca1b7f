#!/usr/bin/env python3
"""Draws Discord message payloads as a PNG in Discord's dark theme, for the README's picture of
what a player sees: the bodies the bot sends to Discord's REST API (as the Discord stand-in of
the integration tests records them) drawn as the channel would show them.

    python3 scripts/render-discord-message.py OUT.png STAGE1.json [STAGE2.json ...]
        [--caption "1. At once: ..." --caption "2. Seconds later: ..."] [--side-by-side] [--scale 2]

Each payload file holds a message body ({"content", "embeds", "components"}), a recorded
request ({"body": {...}}), or an interaction callback ({"type": 4, "data": {...}}); several are
drawn as successive stages, top to bottom or side by side, each under its caption (in order).
Draws Discord's light Markdown (**bold**, *italic*, `code`, [links](url), > quotes, - bullets,
# headings, ``` blocks); glyphs the DejaVu fonts lack (most emoji) are left out. Standard
library and Pillow only, no network.
"""

import argparse
import json
import re
import sys

from PIL import Image, ImageDraw, ImageFont

FONTS = "/usr/share/fonts/truetype/dejavu/"
S = 2  # pixels per layout unit (set by --scale)
MSG_W, CARD_W, GUTTER = 560, 520, 72  # message text width, embed card's widest, text's left edge
WIDTH = GUTTER + MSG_W + 16
BG, CARD, CODE_BG, RULE = "#313338", "#2b2d31", "#1e1f22", "#3f4147"
TEXT, BRIGHT, MUTED, LINK = "#dbdee1", "#f2f3f5", "#b5bac1", "#00a8fc"
BUTTONS = {1: "#5865f2", 2: "#4e5058", 3: "#248046", 4: "#da373c", 5: "#4e5058"}
INVISIBLE = "\ufe0e\ufe0f\u200d\u20e3"

_fonts, _has = {}, {}


def font_for(style, size):
    """DejaVu Sans Condensed (near Discord's gg sans in width), or Mono for code, at size * S."""
    mono = "code" in style or "pre" in style
    suffix = ("Bold" if "b" in style else "") + ("Oblique" if "i" in style else "")
    path = FONTS + ("DejaVuSansMono" if mono else "DejaVuSansCondensed") + ("-" + suffix) * bool(suffix) + ".ttf"
    key = (path, round((size * 0.92 if mono else size) * S))
    return _fonts.get(key) or _fonts.setdefault(key, ImageFont.truetype(*key))


def drawable(text, font):
    """The text without the characters the font would draw as its empty box (most emoji)."""
    for ch in set(text) - set(INVISIBLE):
        if (font.path, ch) not in _has:
            mask, notdef = font.getmask(ch), font.getmask("\U0010fffd")
            _has[(font.path, ch)] = ch.isspace() or mask.size != notdef.size or bytes(mask) != bytes(notdef)
    return "".join(ch for ch in text if ch not in INVISIBLE and _has[(font.path, ch)])


def width_of(t, style, font):
    return font.getlength(t) / S + (6 if "code" in style else 0)  # inline code has padding


INLINE = re.compile(
    r"\\([\\*_`~\[\]()<>#|-])|\*\*(.+?)\*\*(?!\*)|__(.+?)__|~~(.+?)~~|\*(?![\s*])(.+?)(?<!\s)\*(?!\*)|(?<!\w)_(.+?)_(?!\w)"
    r"|`([^`]+)`|\[([^\]]+)\]\(<?(https?://[^)\s>]+)>?\)|<(https?://[^>\s]+)>|(https?://[^\s<]*[^\s<.,:;\"')\]])"
    r"|<a?:(\w+):\d+>|\|\|(.+?)\|\||<(@[!&]?|#)\d+>"
)
FLAGS = [None, "b", "u", "s", "i", "i", "code", "link", None, "link", "link", None, None, "link"]
MENTIONS = {"@": "@usuario", "@!": "@usuario", "@&": "@rol", "#": "#canal"}


def inline(text, style=frozenset()):
    """Discord's inline Markdown as (text, style) runs; style holds b, i, u, s, code, link."""
    runs, pos = [], 0
    for m in INLINE.finditer(text):
        runs.append((text[pos : m.start()], style))
        n = next(i for i, g in enumerate(m.groups()) if g is not None)
        inner = m.group(n + 1)
        inner, flagged = {11: f":{inner}:", 13: MENTIONS.get(inner)}.get(n, inner), style | {FLAGS[n]} - {None}
        # escaped char, code, links, custom emoji, mentions: no Markdown inside
        runs += [(inner, flagged)] if n in (0, 6, 9, 10, 11, 13) else inline(inner, flagged)
        pos = m.end()
    return runs + [(text[pos:], style)]


def wrap(runs, width, size):
    """Runs laid out in lines at most width wide: each line a list of (x, text, style, font, w)."""
    groups, word = [], []
    for text, style in runs:
        if "code" in style or "pre" in style:
            text = text.replace(" ", "\u00a0")
        for piece in re.findall(r"[ \t]+|[^ \t]+", text):
            if piece[0] in " \t":
                groups, word = groups + [word, None], []
            elif piece := drawable(piece, font := font_for(style, size)):
                word.append((piece, style, font))
    groups = [g for g in groups + [word] if g != []]
    lines, x, space = [[]], 0.0, False
    blank = font_for(frozenset(), size).getlength(" ") / S
    for group in groups:
        if group is None:
            space = bool(lines[-1])
            continue
        gw = sum(width_of(*piece) for piece in group)
        if lines[-1] and x + (blank if space else 0) + gw > width:
            lines, x = lines + [[]], 0.0
        x, space = x + (blank if space and lines[-1] else 0), False
        if gw > width:  # a path or a word longer than the line: broken anywhere
            group = [(c, style, font) for t, style, font in group for c in t]
        for t, style, font in group:
            if x + (w := width_of(t, style, font)) > width and lines[-1]:
                lines, x = lines + [[]], 0.0
            lines[-1].append((x, t, style, font, w))
            x += w
    return lines


def rect(d, box, fill, r=0, corners=None):
    if d:
        x0, y0, x1, y1 = (round(v * S) for v in box)
        d.rounded_rectangle((x0, y0, x1 - 1, y1 - 1), radius=r * S, fill=fill, corners=corners)


def draw_line(d, x, top, lh, items, size, colour):
    baseline = (top + lh / 2 + size * 0.36) * S
    for ix, t, style, font, w in items:
        if "code" in style:
            rect(d, (x + ix, top + 1, x + ix + w, top + lh - 1), CODE_BG, 3)
        fill = LINK if "link" in style else colour
        d.text(((x + ix + (3 if "code" in style else 0)) * S, baseline), t, font=font, fill=fill, anchor="ls")
        for flag, dy in (("s", -size * 0.3), ("u", size * 0.12)):
            if flag in style:
                d.line(((x + ix) * S, baseline + dy * S, (x + ix + w) * S, baseline + dy * S), fill=fill, width=S)


def text_block(d, x, y, width, text, size, lh, colour, base=frozenset(), markdown=True):
    """Draws text (when d is not None) from (x, y), wrapped to width; returns (height, widest)."""
    h, widest, in_code, quoting = 0.0, 0.0, False, False
    for raw in str(text).split("\n"):
        indent, scale, style, tint, quote, bullet = 0, 1.0, base, colour, False, False
        if markdown and raw.lstrip().startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            runs, indent = [(raw or " ", base | {"pre"})], 8
        elif not markdown:
            runs = [(raw, base)]
        else:
            if m := re.match(r">>> ?(.*)", raw):
                quoting, raw = True, m.group(1)
            if m := re.match(r"> ?(.*)", raw):
                raw, quote = m.group(1), True
            quote, body = quote or quoting, raw
            indent = 16 if quote else 0
            if m := re.match(r"(#{1,3}) (.*)", body):
                scale, style, body = (1.5, 1.25, 1.1)[len(m.group(1)) - 1], base | {"b"}, m.group(2)
            elif m := re.match(r"-# (.*)", body):
                scale, tint, body = 0.85, MUTED, m.group(1)
            elif m := re.match(r"( *)[-*] (.*)", body):
                indent, bullet, body = indent + 22 + 18 * (len(m.group(1)) // 2), True, m.group(2)
            runs = inline(body, style)
        fsize, flh = size * scale, lh * scale
        has_text = "".join(t for t, _ in runs).strip()
        lines = wrap(runs, width - indent * (2 if in_code else 1), fsize) if has_text else [[]]
        for n, items in enumerate(lines):
            if in_code:
                rect(d, (x, y + h, x + width, y + h + flh), CODE_BG)
            if quote:
                rect(d, (x, y + h, x + 4, y + h + flh), "#4e5058")
            if bullet and n == 0:
                mid = y + h + flh / 2
                rect(d, (x + indent - 14, mid - 2.5, x + indent - 9, mid + 2.5), tint, 3)
            if d:
                draw_line(d, x + indent, y + h, flh, items, fsize, tint)
            if items:
                widest = max(widest, indent + items[-1][0] + items[-1][4])
            h += flh
    return h, widest


def embed(d, x, y, e):
    """An embed card from (x, y); returns its height."""
    ix, cw = x + 16, CARD_W - 32

    def layout(dd):
        cy, widest = y + 8, 0.0

        def block(text, size, lh, colour, base=frozenset(), markdown=True, width=cw, at=ix, after=0):
            nonlocal cy, widest
            bh, bw = text_block(dd, at, cy, width, text, size, lh, colour, base, markdown)
            widest, cy = max(widest, at - ix + bw), cy + bh + after

        if name := (e.get("author") or {}).get("name"):
            block(name, 12.5, 18, BRIGHT, {"b"}, False, after=6)
        if title := e.get("title"):
            block(title, 14.5, 20, LINK if e.get("url") else BRIGHT, {"b"}, after=6)
        if description := e.get("description"):
            block(description, 13.5, 19, TEXT)
        fields, rows = e.get("fields") or [], []
        for field in fields:
            if field.get("inline") and rows and rows[-1][0].get("inline") and len(rows[-1]) < 3:
                rows[-1].append(field)
            else:
                rows.append([field])
        for row in rows:
            cy += 8
            top, bottom, colw = cy, cy, (cw - 8 * (len(row) - 1)) / len(row)
            for n, field in enumerate(row):
                cy, at = top, ix + n * (colw + 8)
                block(field.get("name") or "", 13, 18, BRIGHT, {"b"}, width=colw, at=at, after=2)
                block(field.get("value") or "", 13.5, 19, TEXT, width=colw, at=at)
                bottom = max(bottom, cy)
            cy = bottom
        if footer := (e.get("footer") or {}).get("text"):
            cy += 8
            block(footer, 11.5, 16, MUTED, markdown=False)
        return cy + 16 - y, (CARD_W if len(rows) < len(fields) else min(CARD_W, widest + 32))

    h, w = layout(None)
    rect(d, (x + 4, y, x + w, y + h), CARD, 4, (False, True, True, False))
    bar = "#%06x" % (int(e["color"]) & 0xFFFFFF) if e.get("color") else CODE_BG
    rect(d, (x, y, x + 4, y + h), bar, 4, (True, False, False, True))
    if d:
        layout(d)
    return h


def buttons(d, x, y, rows):
    """Action rows of buttons (or a select menu's box) from (x, y); returns their height."""
    cy = y
    for row in rows:
        bx, cy = x, cy + 8
        for c in row.get("components") or []:
            label = (c.get("emoji") or {}).get("name", "") + " " + (c.get("label") or c.get("placeholder") or "")
            items = wrap([(label.strip() + (" ↗" if c.get("style") == 5 else ""), frozenset())], 10_000, 13)[0]
            w = max(60, items[-1][0] + items[-1][4] + 32 if items else 60) if c.get("type") == 2 else 400
            if bx + w > x + MSG_W and bx > x:
                bx, cy = x, cy + 40
            fill = BUTTONS.get(c.get("style"), BUTTONS[2]) if c.get("type") == 2 else CODE_BG
            if c.get("disabled"):  # half-transparent over the background
                fill = "#" + "".join("%02x" % ((int(fill[i : i + 2], 16) + int(BG[i : i + 2], 16)) // 2) for i in (1, 3, 5))
            rect(d, (bx, cy, bx + w, cy + 32), fill, 8 if c.get("type") == 2 else 4)
            if d:
                draw_line(d, bx + 16, cy, 32, items, 13, "#7f8189" if c.get("disabled") else BRIGHT)
            bx += w + 8
        cy += 32
    return cy - y


def message(d, x, y, p):
    """The bot's message (avatar, name, APP badge, content, embeds, buttons); returns its height."""
    bx = x + GUTTER + text_block(d, x + GUTTER, y, MSG_W, "Oráculo", 15, 22, BRIGHT, {"b"}, False)[1] + 6
    rect(d, (x + 16, y + 2, x + 56, y + 42), "#7b5ea7", 20)  # the avatar
    rect(d, (bx, y + 4, bx + 30, y + 19), "#5865f2", 3)
    for cx, cy, letters, size in ((x + 36, y + 22, "O", 18), (bx + 15, y + 12, "APP", 9.5)) if d else ():
        d.text((cx * S, cy * S), letters, font=font_for({"b"}, size), fill="white", anchor="mm")
    cy = y + 22
    if content := p.get("content"):
        cy += text_block(d, x + GUTTER, cy, MSG_W, content, 15, 22, TEXT)[0]
    for e in p.get("embeds") or []:
        cy += 6 + embed(d, x + GUTTER, cy + 6, e)
    cy += buttons(d, x + GUTTER, cy, p.get("components") or [])
    return max(cy - y, 44)


def stage(d, x, y, p, caption):
    cy = y + 16
    if caption:
        cy += text_block(d, x + 16, cy, WIDTH - 32, caption, 13, 19, MUTED, {"b"})[0] + 14
    return cy + message(d, x, cy, p) + 20 - y


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            payload = json.load(f)
    except json.JSONDecodeError as err:
        sys.exit(f"render-discord-message: {path}: not valid JSON: {err}")
    except (OSError, UnicodeDecodeError) as err:
        sys.exit(f"render-discord-message: {path}: cannot read it: {err}")
    for key in ("body", "data"):  # a recorded request; an interaction callback ({"type": 4, "data": ...})
        if isinstance(payload, dict) and isinstance(payload.get(key), dict) and (key == "body" or "type" in payload):
            payload = payload[key]
    if not isinstance(payload, dict):
        sys.exit(f"render-discord-message: {path}: expected a JSON object (a message body), got {type(payload).__name__}")
    return payload


def main():
    global S
    parser = argparse.ArgumentParser(description="Draws Discord message payloads as a PNG (Discord's dark theme).")
    parser.add_argument("out", help="the PNG to write")
    parser.add_argument("payloads", nargs="+", help="message bodies (JSON), drawn as successive stages")
    parser.add_argument("--caption", action="append", default=[], help="a stage's caption, in order (repeatable)")
    parser.add_argument("--side-by-side", action="store_true", help="stages in columns, not one under another")
    parser.add_argument("--scale", type=int, default=2, help="pixels per Discord pixel (default 2)")
    args = parser.parse_intermixed_args()
    if len(args.caption) > len(args.payloads):
        parser.error(f"{len(args.caption)} captions for {len(args.payloads)} payloads")
    S = args.scale
    stages = list(zip(args.payloads, map(load, args.payloads), args.caption + [None] * len(args.payloads)))
    heights = []
    for path, p, cap in stages:
        try:
            heights.append(stage(None, 0, 0, p, cap))
        except (AttributeError, TypeError, KeyError, ValueError) as err:
            sys.exit(f"render-discord-message: {path}: not shaped like a Discord message body: {err!r}")
    size = (WIDTH * len(stages), max(heights)) if args.side_by_side else (WIDTH, sum(heights))
    image = Image.new("RGB", (round(size[0] * S), round(size[1] * S)), BG)
    d = ImageDraw.Draw(image)
    for i, (path, p, cap) in enumerate(stages):
        x, y = (WIDTH * i, 0) if args.side_by_side else (0, sum(heights[:i]))
        if i:  # a rule between stages
            rect(d, (x, 0, x + 1, size[1]) if args.side_by_side else (0, y, WIDTH, y + 1), RULE)
        stage(d, x, y, p, cap)
    image.save(args.out)


if __name__ == "__main__":
    main()
