"""Checks of values that several apps accept from their users."""


def path_problem(path: str, what: str) -> str | None:
    """Why a relative path (a plugin source file's name, a prefix of object keys) is refused, or None: such names
    may be written out as files or listed as folders, so none may climb out of its folder or hide control
    characters. `what` names the path in the message ("filename")."""
    if not path.strip() or len(path) > 200:
        return f"A {what} is 1 to 200 characters long."
    if path.startswith("/") or "\\" in path or any(ord(char) < 32 or ord(char) == 127 for char in path):
        return f"A {what} is a relative path with / between its parts, without backslashes or control characters."
    if any(part in ("", ".", "..") for part in path.split("/")):
        return f"No part of a {what} may be empty, '.' or '..'."
    return None
