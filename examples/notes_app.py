"""A small Tk notes app whose widgets AI agents can drive through toolbridge.

Run the daemon (`toolbridge serve`), then `python examples/notes_app.py`. Agents then see tools
such as `Notes__list_widgets`, `Notes__type_text`, `Notes__click_button`, `Notes__read_text`
and `Notes__screenshot`.

How it embeds toolbridge: the GUI runs Tk's main loop on the main thread as usual;
``app.start_in_thread()`` runs the toolbridge client (network, heartbeats, reconnects) on a
background thread; ``tk_executor(root)`` makes every tool run on the Tk thread, where touching
widgets is safe. A tool that keeps Tk busy does not stop heartbeats, which the background
thread answers.
"""

from __future__ import annotations

import argparse
import io
import shlex
import sys
import tkinter as tk
from typing import Any

from app_client import App, ToolError, image, text, tk_executor


class NotesWindow:
    """The GUI: a title field, a body, Save and Clear buttons, and a status line."""

    def __init__(self, root: tk.Tk) -> None:
        self.root = root
        root.title("Notes")
        root.geometry("480x320+0+0")
        root.configure(background="#f4f1e8")
        self.saved: list[tuple[str, str]] = []

        tk.Label(root, text="Title", background="#f4f1e8").pack(anchor="w", padx=8, pady=(8, 0))
        self.title = tk.Entry(root, width=50)
        self.title.pack(fill="x", padx=8)
        tk.Label(root, text="Note", background="#f4f1e8").pack(anchor="w", padx=8, pady=(8, 0))
        self.body = tk.Text(root, height=8, width=50)
        self.body.pack(fill="both", expand=True, padx=8)
        buttons = tk.Frame(root, background="#f4f1e8")
        buttons.pack(fill="x", padx=8, pady=8)
        self.save_button = tk.Button(buttons, text="Save", command=self.save)
        self.save_button.pack(side="left")
        self.clear_button = tk.Button(buttons, text="Clear", command=self.clear)
        self.clear_button.pack(side="left", padx=8)
        self.status = tk.Label(root, text="No notes saved yet", background="#f4f1e8", anchor="w")
        self.status.pack(fill="x", padx=8, pady=(0, 8))

        self.fields: dict[str, tk.Entry | tk.Text] = {"title": self.title, "body": self.body}
        self.buttons: dict[str, tk.Button] = {"save": self.save_button, "clear": self.clear_button}

    def save(self) -> None:
        title = self.title.get().strip() or "Untitled"
        self.saved.append((title, self.body.get("1.0", "end-1c")))
        self.status.configure(text=f"Saved {len(self.saved)} note(s); last: {title}")

    def clear(self) -> None:
        self.title.delete(0, "end")
        self.body.delete("1.0", "end")
        self.status.configure(text="Cleared")

    def read(self, field: str) -> str:
        if field == "status":
            return str(self.status.cget("text"))
        widget = self._field(field)
        return widget.get("1.0", "end-1c") if isinstance(widget, tk.Text) else widget.get()

    def write(self, field: str, value: str, replace: bool) -> None:
        widget = self._field(field)
        if isinstance(widget, tk.Text):
            if replace:
                widget.delete("1.0", "end")
            widget.insert("end", value)
        else:
            if replace:
                widget.delete(0, "end")
            widget.insert("end", value)

    def _field(self, field: str) -> tk.Entry | tk.Text:
        try:
            return self.fields[field]
        except KeyError:
            raise ToolError(f"no field {field!r}; fields are: {', '.join(self.fields)}") from None

    def png(self) -> tuple[bytes, int, int]:
        """A PNG of this window as it is on screen (Pillow's ImageGrab, all platforms)."""
        from PIL import ImageGrab

        self.root.update()
        x, y = self.root.winfo_rootx(), self.root.winfo_rooty()
        width, height = self.root.winfo_width(), self.root.winfo_height()
        shot = ImageGrab.grab(bbox=(x, y, x + width, y + height))
        buffer = io.BytesIO()
        shot.save(buffer, format="PNG")
        return buffer.getvalue(), width, height


def build_app(window: NotesWindow, **app_options: Any) -> App:
    app = App("Notes", gui_executor=tk_executor(window.root), app_version="1.0", **app_options)

    @app.tool(annotations={"readOnlyHint": True})
    def list_widgets() -> list[dict[str, str]]:
        """List the window's text fields and buttons with their current text."""
        widgets = [{"name": n, "kind": "field", "text": window.read(n)} for n in window.fields]
        widgets += [{"name": n, "kind": "button", "text": str(b.cget("text"))} for n, b in window.buttons.items()]
        widgets.append({"name": "status", "kind": "label", "text": window.read("status")})
        return widgets

    @app.tool
    def click_button(name: str) -> str:
        """Click a button by name ("save" or "clear") and return the status line after it."""
        button = window.buttons.get(name)
        if button is None:
            raise ToolError(f"no button {name!r}; buttons are: {', '.join(window.buttons)}")
        button.invoke()
        return window.read("status")

    @app.tool
    def type_text(field: str, text: str, replace: bool = True) -> str:
        """Type text into a field ("title" or "body"); replaces its content unless replace is false."""
        window.write(field, text, replace)
        return window.read(field)

    @app.tool(annotations={"readOnlyHint": True})
    def read_text(field: str) -> str:
        """Read the text of a field ("title", "body") or of the status line ("status")."""
        return window.read(field)

    @app.tool(annotations={"readOnlyHint": True})
    def screenshot() -> Any:
        """Take a PNG screenshot of the Notes window."""
        data, width, height = window.png()
        return [image(data), text(f"Notes window, {width}x{height} pixels")]

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", help="the daemon's home directory (default: as toolbridge)")
    parser.add_argument("--instance-id", default="notes-main", help="stable id of this window")
    args = parser.parse_args()

    try:
        root = tk.Tk()
    except tk.TclError as exc:  # no display (SSH, a container, CI): say how to run it anyway
        command = shlex.join([sys.executable, *sys.argv])
        sys.exit(f"notes_app: cannot open a window ({exc}).\n"
                 "It needs a display. Without one, run it on a virtual display (Debian/Ubuntu: "
                 f"sudo apt-get install xvfb):\n    xvfb-run -a {command}")
    window = NotesWindow(root)
    app = build_app(window, home=args.home, instance_id=args.instance_id)
    runner = app.start_in_thread()
    try:
        root.mainloop()
    except KeyboardInterrupt:  # Ctrl-C in the terminal: quit like the window's close button
        pass
    finally:
        runner.stop()  # goodbye: the daemon releases the app's names at once


if __name__ == "__main__":
    main()
