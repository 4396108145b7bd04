"""Checks the links of a built mdbook: every relative href or src of every
HTML page names a file of the book and, with a #fragment, an element id on
that page. Prints each broken link and exits 1 if there is one.

    python3 scripts/check_book_links.py target/book
"""

import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit


class Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids = set()
        self.links = []

    def handle_starttag(self, tag, attributes):
        for name, value in attributes:
            if name == "id" and value:
                self.ids.add(value)
            if name in ("href", "src") and value:
                self.links.append(value)


def read(path):
    page = Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def main(book):
    book = Path(book).resolve()
    pages = {path: read(path) for path in book.rglob("*.html")}
    if len(pages) < 10:
        print(f"check-book-links: only {len(pages)} pages under {book}: was the book built?")
        return 1
    broken = []
    for path, page in pages.items():
        for link in page.links:
            parts = urlsplit(link)
            # Absolute and site-root links (mdbook's 404 page links `/`,
            # resolved against the site it is served from) are not the book's.
            if parts.scheme or parts.netloc or link.startswith("/"):
                continue
            target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            if book not in target.parents and target != book:
                broken.append(f"{path.relative_to(book)}: {link} leaves the book")
                continue
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{path.relative_to(book)}: {link}: no {target.relative_to(book)}")
                continue
            if parts.fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else read(target).ids
                if unquote(parts.fragment) not in ids:
                    broken.append(f"{path.relative_to(book)}: {link}: no id #{parts.fragment}")
    for line in broken:
        print(f"check-book-links: {line}")
    print(f"check-book-links: {len(pages)} pages, {sum(len(p.links) for p in pages.values())} links, {len(broken)} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "target/book"))
