"""The one terminal table of every gapbench command, fitted to the width it is printed at.

A number is never broken: cells of value columns never wrap or get cut. When the table is wider
than the terminal, the columns marked droppable go first (the caption names them; every value is
in the JSON and CSV), and when even the columns that stay do not fit, each row is printed as a
block of `column: value` lines. Free-text columns (labels) wrap at spaces; rows that are not
measurements (errors, unavailable backends) are printed as notes under the table, where their
reason wraps like prose. The layout is chosen when rich renders the table, for the width of that
console: the same object reads at 80 columns, 100, or 200 (a log file).
"""
from __future__ import annotations

from dataclasses import dataclass, field

#: columns of a rich table with edges and one space of padding each side: width = sum(cells) +
#: 3 per column + 1
_EDGE, _PER_COL = 1, 3
#: narrowest a free-text column is made before columns are dropped
_MIN_TEXT = 10


@dataclass
class Col:
    """A column: its header (units belong here, e.g. "median us"), whether it is free text that
    may wrap at spaces (labels, never numbers), and its drop rank: 0 always shown, higher ranks
    dropped first when the width is short (ties: the rightmost first)."""

    header: str
    drop: int = 0
    text: bool = False
    right: bool = False


@dataclass
class FitTable:
    title: str
    cols: list[Col]
    caption: str = ""
    rows: list[tuple[list[str], str]] = field(default_factory=list)
    notes: list[tuple[str, str]] = field(default_factory=list)

    def add_row(self, *cells: object, style: str = "") -> None:
        if len(cells) != len(self.cols):
            raise ValueError(f"{self.title}: a row of {len(cells)} cells for {len(self.cols)} columns")
        self.rows.append(([("" if c is None else str(c)) for c in cells], style))

    def add_note(self, text: str, style: str = "") -> None:
        """A line under the table (an error or an unavailable backend, with its reason)."""
        self.notes.append((text, style))

    def __bool__(self) -> bool:
        return bool(self.rows or self.notes)

    # ---- layout
    def layout(self, width: int) -> tuple[list[int], dict[int, int]] | None:
        """The columns shown (indices) and their widths at `width`, or None when even the columns
        that are never dropped do not fit (then the rows are printed as blocks)."""
        from rich.cells import cell_len

        def longest_word(s: str) -> int:
            return max((cell_len(w) for w in s.split()), default=0)

        need: dict[int, int] = {}  # the width a column must have
        want: dict[int, int] = {}  # the width that shows it on one line
        shown = []
        for i, c in enumerate(self.cols):
            cells = [r[0][i] for r in self.rows]
            if not any(cells):
                continue  # an empty column says nothing (e.g. % of a datasheet on a CPU)
            full = max(cell_len(x) for x in cells)
            head = longest_word(c.header)
            if c.text:
                need[i] = max(head, min(_MIN_TEXT, full), min(max(longest_word(x) for x in cells), 24))
            else:
                need[i] = max(head, full)
            want[i] = max(need[i], full, cell_len(c.header))
            shown.append(i)

        def total(cols, w) -> int:
            return sum(w[i] for i in cols) + _PER_COL * len(cols) + _EDGE

        while total(shown, need) > width:
            droppable = [i for i in shown if self.cols[i].drop > 0]
            if not droppable:
                return None
            worst = max(droppable, key=lambda i: (self.cols[i].drop, i))
            shown.remove(worst)
        widths = dict(need)
        spare = width - total(shown, need)
        # while there is room: value columns grow to fit their header on one line, then text
        # columns to their full width
        for i in sorted(shown, key=lambda i: self.cols[i].text):
            grow = max(0, min(spare, want[i] - widths[i]))
            widths[i] += grow
            spare -= grow
        return shown, widths

    def __rich_console__(self, console, options):
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        width = options.max_width
        fit = self.layout(width) if self.rows else ([], {})
        parts = []
        if fit is None:
            parts.append(Text(self.title, style="italic", justify="left"))
            for cells, style in self.rows:
                grid = Table.grid(padding=(0, 1))
                grid.add_column(no_wrap=True, style="bold")
                grid.add_column(overflow="fold")
                for c, v in zip(self.cols, cells):
                    if v:
                        grid.add_row(c.header, Text(v, style=style))
                parts += [Text(""), grid]
            if self.caption:
                parts.append(Text(self.caption, style="dim"))
        elif self.rows:
            shown, widths = fit
            dropped = [self.cols[i].header for i, c in enumerate(self.cols)
                       if i not in shown and any(r[0][i] for r in self.rows)]
            caption = self.caption
            if dropped:
                caption = (caption.rstrip(".") + ". " if caption else "") + (
                    f"Not shown at {width} columns: {', '.join(dropped)} (widen the terminal, or see the JSON/CSV).")
            t = Table(title=Text(self.title), caption=Text(caption) if caption else None, title_justify="left",
                      caption_justify="left")
            for i in shown:
                c = self.cols[i]
                # A value column is as wide as its widest cell, so its cells never wrap; only
                # its header may, at a space.
                t.add_column(Text(c.header), width=widths[i], overflow="fold", justify="right" if c.right else "left")
            for cells, style in self.rows:
                t.add_row(*[Text(cells[i]) for i in shown], style=style or None)
            parts.append(t)
        else:
            parts.append(Text(self.title, style="italic"))
        for text, style in self.notes:
            parts.append(Text(text, style=style))
        yield Group(*parts)
