"""Where a generated text goes: standard output, or with a page, a check that the page holds it
verbatim (how the CPU tests keep docs/VALIDATION.md generated from the committed files). Shared by
the scripts beside it that print what the page shows."""
import sys


def print_or_check(text, page, what, regenerate):
    """Writes `text` to stdout and returns 0; with `page` (a path), returns 0 when the page holds
    it verbatim, else 1 after saying which `what` is missing and the `regenerate` command."""
    if page is None:
        sys.stdout.write(text)
        return 0
    if text in page.read_text():
        return 0
    print(f"{page} does not hold {what}; regenerate it with\n  {regenerate}", file=sys.stderr)
    return 1
