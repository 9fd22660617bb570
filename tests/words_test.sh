#!/usr/bin/env bash
# Fails when a file of the project, or a file's name, speaks of how the project was made
# rather than of the project: the words the project rules out (whole words, any case; in
# file names anywhere) and references to tracker entries by number, which a user cannot
# follow.
# The patterns are spelled so that this file does not match itself.
set -euo pipefail
cd "${1:?source dir}"
words='\b(s[e]ssions?|l[e]nt|d[e]vice tool|i[s]sue [0-9]+)\b'
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  files() { git ls-files --cached --others --exclude-standard; }
else
  files() { find . -type f -not -path './build*' -not -path './.venv/*' | sed 's|^\./||'; }
fi
bad=0
if files | grep -i -E "$words|s[e]ssion|(^|[^a-z])l[e]nt([^a-z]|$)"; then
  echo "the file names above speak of how the project was made"
  bad=1
fi
if files | grep -v -E '\.(png|gz|bin)$' | tr '\n' '\0' | xargs -0 grep -n -i -I -P "$words" 2>/dev/null; then
  echo "the lines above speak of how the project was made, not of the project"
  bad=1
fi
[ $bad = 0 ] && echo "project words: none found"
exit $bad
