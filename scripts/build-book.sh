#!/usr/bin/env bash
# Builds the documentation book (docs/, mdbook) into target/book and checks
# every link of the built pages: each relative link names a file of the book
# and, with a #fragment, an id on that page. (The sources' links and JSON
# examples are also checked by `cargo test -p baton-architecture-tests`.)
#
#   bash scripts/build-book.sh
set -euo pipefail
cd "$(dirname "$0")/.."

mdbook="$(bash scripts/install-mdbook.sh)"
rm -rf target/book
"$mdbook" build docs
python3 scripts/check_book_links.py target/book
