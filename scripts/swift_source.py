"""What scripts/count-shape and scripts/check-layout read of a Swift file: its code with
comments and string literals blanked out (so that every brace left is code), and the
declarations at its top level (brace depth 0)."""
import re

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def blank(text):
    """`text` with comments and string literals replaced by spaces (newlines kept), so
    that every brace left is code."""
    out = list(text)
    n = len(text)

    def clear(start, end):
        for k in range(start, min(end, n)):
            if out[k] != "\n":
                out[k] = " "

    def code(i, closer):
        """Scan code from i until `closer` (a ')' ending an interpolation) at depth 0, or
        the end; returns the index after it."""
        depth = 0
        while i < n:
            c = text[i]
            if text.startswith("//", i):
                end = text.find("\n", i)
                end = n if end < 0 else end
                clear(i, end)
                i = end
            elif text.startswith("/*", i):
                end = block_comment(i)
                clear(i, end)
                i = end
            elif c == '"' or (c == "#" and re.match(r'#+"', text[i:])):
                end = string(i)
                clear(i, end)
                i = end
            elif closer and c == "(":
                depth += 1
                i += 1
            elif closer and c == ")":
                if depth == 0:
                    return i + 1
                depth -= 1
                i += 1
            else:
                i += 1
        return i

    def block_comment(i):
        depth = 0
        while i < n:
            if text.startswith("/*", i):
                depth += 1
                i += 2
            elif text.startswith("*/", i):
                depth -= 1
                i += 2
                if depth == 0:
                    return i
            else:
                i += 1
        return i

    def string(i):
        hashes = 0
        while text[i] == "#":
            hashes += 1
            i += 1
        multi = text.startswith('"""', i)
        quote = '"""' if multi else '"'
        i += len(quote)
        terminator = quote + "#" * hashes
        escape = "\\" + "#" * hashes
        while i < n:
            if text.startswith(escape, i):
                after = i + len(escape)
                if after < n and text[after] == "(":
                    i = code(after + 1, True)
                else:
                    i = after + 1
            elif text.startswith(terminator, i):
                return i + len(terminator)
            elif not multi and text[i] == "\n":
                return i  # an unterminated literal ends at the line (it would not compile)
            else:
                i += 1
        return i

    code(0, False)
    return "".join(out)


# A declaration's attributes and modifiers (before its keyword).
MODIFIERS = r"(?:@\w+(?:\([^)]*\))?\s+|(?:public|package|internal|fileprivate|private|open|final|indirect|nonisolated|static|class|override|mutating|nonmutating|lazy|weak|unowned|convenience|required|dynamic|distributed|consuming|borrowing)(?:\([^)]*\))?\s+)*"


TOP_LEVEL = re.compile(
    r"^" + MODIFIERS + r"(actor|class|struct|enum|protocol|extension|func|var|let|typealias|macro|precedencegroup|(?:prefix\s+|postfix\s+|infix\s+)?operator)\b\s*(" + IDENT + r"(?:\." + IDENT + r")*)?"
)
TYPE_KINDS = ("actor", "class", "struct", "enum", "protocol")


def top_level_declarations(code):
    """(line number, keyword, name) of each declaration at depth 0 of `code` (blanked):
    keyword is one of TOP_LEVEL's, or None for any other statement. Imports, compiler
    directives (`#if`), attributes on a line of their own and the continuation lines of a
    declaration (inside its parentheses, or starting with `)`, `where`, `->`, `:`, `,`)
    are not declarations."""
    found = []
    depth = 0
    for number, line in enumerate(code.split("\n"), 1):
        text = line.strip()
        continuation = re.match(r"(?:[})\]:,.]|->|where\b|throws\b|async\b|&&|\|\|)", text)
        if depth == 0 and text and not continuation:
            match = TOP_LEVEL.match(text)
            if match:
                found.append((number, match.group(1), match.group(2)))
            elif not re.match(r"(?:#|(?:@\w+(?:\([^)]*\))?\s*)*(?:import\s|$))", text):
                found.append((number, None, text))
        depth += sum(line.count(c) for c in "{([") - sum(line.count(c) for c in "})]")
    return found
