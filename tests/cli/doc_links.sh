# The documentation holds together: every relative link of README.md and
# docs/*.md names a file of the repository (an image included), every man
# page they name (man tfm-x, tfm-x(1), tfm(7), man/tfm-x.1) is in man/,
# and every page of docs/ is linked from the README.
source "$(dirname "$0")/common.bash"
python3 - "$TFM_SOURCE" >"$TMP/out" 2>&1 <<'PY' || fail "$(cat "$TMP/out")"
import os, re, sys

root = sys.argv[1]
pages = ["README.md"] + sorted("docs/" + f for f in os.listdir(os.path.join(root, "docs")) if f.endswith(".md"))
man = set(os.listdir(os.path.join(root, "man")))
bad = []
linked = set()
for page in pages:
    text = open(os.path.join(root, page), encoding="utf-8").read()
    base = os.path.dirname(page)
    # Links outside code blocks: [text](target) and ![alt](target).
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", prose):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = os.path.normpath(os.path.join(base, target.split("#")[0]))
        linked.add(path)
        if not os.path.exists(os.path.join(root, path)):
            bad.append(f"{page}: a link to {target}, which is not there ({path})")
    # Man pages named anywhere on the page, code included.
    names = set()
    names |= {f"{n}.1" for n in re.findall(r"\bman (tfm-[a-z]+)\b", text)}
    names |= {f"{n}.{s}" for n, s in re.findall(r"\b(tfm(?:-[a-z]+)?)\(([17])\)", text)}
    names |= set(re.findall(r"\bman/(tfm(?:-[a-z]+)?\.[17])\b", text))
    names |= {"tfm.7" for _ in re.findall(r"\bman tfm(?:\.7)?\b(?!-)", text)}
    for n in sorted(names):
        if n not in man:
            bad.append(f"{page}: names the man page {n}, which man/ does not have")
for page in pages[1:]:
    if page not in linked:
        bad.append(f"{page}: no link to it from README.md or another page")
print(f"{len(pages)} pages, {len(linked)} files linked, {len(man)} man pages")
if bad:
    print("\n".join(bad))
    sys.exit(1)
PY
cat "$TMP/out"
finish
