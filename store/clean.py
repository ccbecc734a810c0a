"""LaTeX and Markdown residue -> readable Unicode text (pure text -> text).

Submitted abstracts carry `$\\alpha$`, `\\textbf{...}`, `**bold**`, escaped URLs and unexpanded
author macros (`\\ourmethod`). `clean_text` turns them into plain Unicode and resolves each macro
to the best name the abstract offers. Precompiled stdlib regexes: well under 1 ms per abstract.
`clean_markup` is the pass before macro resolution: it keeps what the authors emphasised and the
acronyms they spelled in bold, which the name finder (store/names.py) reads.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from .text import NAME_TOKEN, NOUN_HEADS, is_namey, strip_token

GREEK = {
    "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ε", "varepsilon": "ε",
    "zeta": "ζ", "eta": "η", "theta": "θ", "vartheta": "ϑ", "iota": "ι", "kappa": "κ",
    "lambda": "λ", "mu": "μ", "nu": "ν", "xi": "ξ", "omicron": "ο", "pi": "π", "varpi": "ϖ",
    "rho": "ρ", "varrho": "ϱ", "sigma": "σ", "varsigma": "ς", "tau": "τ", "upsilon": "υ",
    "phi": "φ", "varphi": "φ", "chi": "χ", "psi": "ψ", "omega": "ω",
    "Gamma": "Γ", "Delta": "Δ", "Theta": "Θ", "Lambda": "Λ", "Xi": "Ξ", "Pi": "Π",
    "Sigma": "Σ", "Upsilon": "Υ", "Phi": "Φ", "Psi": "Ψ", "Omega": "Ω",
}
SYMBOLS = {
    "times": "×", "cdot": "·", "cdotp": "·", "leq": "≤", "le": "≤", "leqslant": "≤", "geq": "≥",
    "ge": "≥", "geqslant": "≥", "neq": "≠", "ne": "≠", "approx": "≈", "sim": "~", "simeq": "≃",
    "cong": "≅", "equiv": "≡", "propto": "∝", "to": "→", "rightarrow": "→", "longrightarrow": "→",
    "leftarrow": "←", "gets": "←", "Rightarrow": "⇒", "Longrightarrow": "⇒", "Leftarrow": "⇐",
    "leftrightarrow": "↔", "Leftrightarrow": "⇔", "iff": "⇔", "implies": "⇒", "mapsto": "↦",
    "uparrow": "↑", "downarrow": "↓", "infty": "∞", "ell": "ℓ", "pm": "±", "mp": "∓",
    "in": "∈", "notin": "∉", "ni": "∋", "subset": "⊂", "subseteq": "⊆", "supset": "⊃",
    "supseteq": "⊇", "cup": "∪", "cap": "∩", "bigcup": "∪", "bigcap": "∩", "setminus": "∖",
    "forall": "∀", "exists": "∃", "partial": "∂", "nabla": "∇", "sum": "∑", "prod": "∏",
    "int": "∫", "oint": "∮", "cdots": "⋯", "ldots": "…", "dots": "…", "vdots": "⋮", "ddots": "⋱",
    "top": "⊤", "bot": "⊥", "perp": "⊥", "circ": "∘", "bullet": "•", "star": "⋆", "ast": "∗",
    "oplus": "⊕", "otimes": "⊗", "odot": "⊙", "ominus": "⊖", "langle": "⟨", "rangle": "⟩",
    "lfloor": "⌊", "rfloor": "⌋", "lceil": "⌈", "rceil": "⌉", "mid": "|", "vert": "|",
    "lvert": "|", "rvert": "|", "Vert": "‖", "lVert": "‖", "rVert": "‖", "ll": "≪", "gg": "≫",
    "lesssim": "≲", "gtrsim": "≳", "prec": "≺", "succ": "≻", "preceq": "⪯", "succeq": "⪰",
    "triangleq": "≜", "coloneqq": "≔", "defeq": "≝", "prime": "′", "emptyset": "∅",
    "varnothing": "∅", "neg": "¬", "lnot": "¬", "land": "∧", "lor": "∨", "wedge": "∧", "vee": "∨",
    "hbar": "ℏ", "aleph": "ℵ", "Re": "ℜ", "Im": "ℑ", "natural": "♮", "sharp": "♯", "flat": "♭",
    "checkmark": "✓", "dagger": "†", "ddagger": "‡", "degree": "°", "angle": "∠", "triangle": "△",
    "square": "□", "diamond": "◇", "rtimes": "⋊", "ltimes": "⋉", "colon": ":", "backslash": "∖",
    "lbrace": "{", "rbrace": "}", "vartriangle": "△", "models": "⊨", "vdash": "⊢",
    "log": "log", "ln": "ln", "exp": "exp", "sin": "sin", "cos": "cos", "tan": "tan",
    "tanh": "tanh", "max": "max", "min": "min", "arg": "arg", "argmax": "argmax",
    "argmin": "argmin", "lim": "lim", "sup": "sup", "inf": "inf", "det": "det", "dim": "dim",
    "ker": "ker", "deg": "deg", "Pr": "Pr", "gcd": "gcd", "mod": "mod", "bmod": "mod",
    "limsup": "lim sup", "liminf": "lim inf", "trace": "tr", "tr": "tr",
}
TEXT_MACROS = {
    "eg": "e.g.", "ie": "i.e.", "etal": "et al.", "etc": "etc.", "wrt": "w.r.t.", "vs": "vs.",
    "cf": "cf.", "aka": "a.k.a.", "iid": "i.i.d.", "resp": "resp.", "ldots": "…",
    "dots": "…", "textellipsis": "…", "textendash": "–", "textemdash": "—", "LaTeX": "LaTeX",
    "TeX": "TeX", "textregistered": "®", "texttrademark": "™", "copyright": "©",
    "textcopyright": "©", "textasciitilde": "~", "textbullet": "•", "textdegree": "°",
    "S": "§", "ss": "ß", "ae": "æ", "AE": "Æ", "oe": "œ", "OE": "Œ", "o": "ø", "O": "Ø",
    "l": "ł", "L": "Ł", "aa": "å", "AA": "Å", "i": "ı", "textquoteright": "’",
    "textquoteleft": "‘", "textquotedblleft": "“", "textquotedblright": "”", "textbar": "|",
    "textless": "<", "textgreater": ">", "textunderscore": "_", "newline": " ", "linebreak": " ",
    "par": " ", "item": " ", "quad": " ", "qquad": " ", "hfill": " ", "enspace": " ",
}
# Font switches, sizes, spacing and layout: they carry no text of their own.
DROP_MACROS = frozenset("""
    bf it em sc tt rm sf sl cal bfseries itshape scshape ttfamily rmfamily sffamily mdseries
    upshape normalfont small large Large LARGE huge Huge tiny scriptsize footnotesize normalsize
    noindent indent centering raggedright raggedleft xspace relax protect smallskip medskip
    bigskip newpage clearpage displaystyle textstyle scriptstyle scriptscriptstyle limits
    nolimits left right big Big bigg Bigg bigl bigr Bigl Bigr biggl biggr middle mathstrut
    strut nonumber notag footnotemark maketitle boldmath unboldmath ignorespaces allowbreak
    nobreak hline toprule midrule bottomrule displaylimits
""".split())
# One-argument commands whose argument is dropped with them.
DROP_WITH_ARG = frozenset("""
    cite citep citet citealp citealt citeauthor citeyear citenum parencite textcite autocite
    ref eqref autoref cref Cref pageref label vspace hspace phantom hphantom vphantom thanks
    index includegraphics bibliographystyle bibliography color footnotetext marginpar
    pagestyle thispagestyle setlength begin end newcommand renewcommand usepackage
""".split())
# One-argument commands that keep their argument (fonts, emphasis, boxes).
KEEP_ARG = frozenset("""
    textbf textit emph texttt textsc textsf textrm textup textsl textmd textnormal underline
    uline underbar mbox makebox hbox fbox text mathrm mathbf mathit mathtt mathsf mathnormal
    boldsymbol bm pmb operatorname mathop mathord mathbin mathrel textsuperscript
    textsubscript ensuremath url nolinkurl path hl sout st ul uwave textcolor colorbox
    framebox centerline mathversion footnote enquote mathsfit mathscr
    mathfrak mathcal mathbb mathds overline widetilde tilde hat widehat bar vec dot ddot
    check breve acute grave overrightarrow underbrace overbrace sqrt
""".split())
EMPH_COMMANDS = frozenset("textbf emph textit texttt textsc textsf mathtt mathbf mathsf boldsymbol bm".split())
COMBINING = {
    "hat": "\u0302", "widehat": "\u0302", "bar": "\u0304", "overline": "\u0304", "tilde": "\u0303",
    "widetilde": "\u0303", "vec": "\u20d7", "overrightarrow": "\u20d7", "dot": "\u0307",
    "ddot": "\u0308", "check": "\u030c", "breve": "\u0306", "acute": "\u0301", "grave": "\u0300",
    "c": "\u0327", "v": "\u030c", "u": "\u0306", "H": "\u030b", "r": "\u030a", "k": "\u0328",
}
ACCENTS = {"'": "\u0301", "`": "\u0300", "^": "\u0302", '"': "\u0308", "~": "\u0303", "=": "\u0304", ".": "\u0307"}
SCRIPT_LETTERS = dict(zip("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "𝒜ℬ𝒞𝒟ℰℱ𝒢ℋℐ𝒥𝒦ℒℳ𝒩𝒪𝒫𝒬ℛ𝒮𝒯𝒰𝒱𝒲𝒳𝒴𝒵"))
DOUBLE_STRUCK = dict(zip("ABCDEFGHIJKLMNOPQRSTUVWXYZ1", "𝔸𝔹ℂ𝔻𝔼𝔽𝔾ℍ𝕀𝕁𝕂𝕃𝕄ℕ𝕆ℙℚℝ𝕊𝕋𝕌𝕍𝕎𝕏𝕐ℤ𝟙"))
SUPERSCRIPT = dict(zip(
    "0123456789+-=()nijklmaobcdefghprstuvwxyzABDEGHIJKLMNOPRTUVW⊤*′",
    "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾ⁿⁱʲᵏˡᵐᵃᵒᵇᶜᵈᵉᶠᵍʰᵖʳˢᵗᵘᵛʷˣʸᶻᴬᴮᴰᴱᴳᴴᴵᴶᴷᴸᴹᴺᴼᴾᴿᵀᵁⱽᵂᵀ*′",
))
SUBSCRIPT = dict(zip("0123456789+-=()aehijklmnoprstuvxβγρφχ", "₀₁₂₃₄₅₆₇₈₉₊₋₌₍₎ₐₑₕᵢⱼₖₗₘₙₒₚᵣₛₜᵤᵥₓᵦᵧᵨᵩᵪ"))
_PRIVATE = re.compile("[\ue000-\uf8ff\u200b\u200c\u200d\ufeff]")
_MD_LINK = re.compile(r"\[([^\[\]\n]{1,300})\]\(\s*(https?://[^)\s]+)\s*\)")
_URL_CHARS = r"(?:[^\s{}<>\[\]()\"'$\\`|^]|\\[_%&#~])+"
_URL_RAW = re.compile(rf"(?:https?://|www\.){_URL_CHARS}")
_BARE_URL_RAW = re.compile(rf"(?<![\w@./])(?:github\.com|gitlab\.com|huggingface\.co|bitbucket\.org)/{_URL_CHARS}")
URL_TRAIL = ".,;:!?'\"*_~"
_URL_TOKEN = re.compile("\ue001(\\d+)\ue001")
_MATH_TOKEN = re.compile("\ue002(\\d+)\ue002")
_ESCAPES = re.compile(r"\\([%&#_{}$ ,;:!>]|\\)")
_ACCENT = re.compile(r"\\([\'\"`^~=.])\s*(?:\{\s*([A-Za-z])\s*\}|([A-Za-z]))")
_MATH = re.compile(r"\$\$(.+?)\$\$|\$(.+?)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.S)
_TWO_ARG = re.compile(
    r"\\(d?t?frac|binom|href|textcolor|colorbox|overset|underset|stackrel|fcolorbox)\s*"
    r"\{([^{}]*)\}\s*\{([^{}]*)\}")
_ONE_ARG = re.compile(
    r"\\(?!(?:d?t?frac|binom|href|overset|underset|stackrel|fcolorbox)(?![A-Za-z]))"
    r"([A-Za-z]+)\*?\s*(?:\[[^\[\]{}]*\])?\s*\{([^{}]*)\}")
_BRACED = re.compile(r"\{([^{}]*)\}")
_SQRT_BARE = re.compile(r"\\sqrt\s*(\w)")
_SCRIPT_BRACED = re.compile(r"([\^_])\s*\{([^{}]*)\}")
_SCRIPT_SINGLE = re.compile(r"([\^_])\s*([^\s{}\\^_])")
_MACRO = re.compile(r"\\([A-Za-z]+)\*?")
_BACKSLASH_ANY = re.compile(r"\\+[A-Za-z]*")
_MD_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")
_MD_BOLD_UNDERSCORE = re.compile(r"__(?<![\w_]__)(?=\S)(.+?)(?<=\S)__(?![\w_])")
_MD_ITALIC = re.compile(r"\*(?<![\w*]\*)(?=[^\s*])([^*]{1,200}?)(?<=[^\s*])\*(?![\w*])")
_MD_ITALIC_UNDERSCORE = re.compile(r"_(?<![\w_]_)(?=[^\s_])([^_]{1,200}?)(?<=[^\s_])_(?![\w_])")
_URL_ESCAPE = re.compile(r"\\([_%&#~])")
_ESCAPED = {"{": "\ue003", "}": "\ue004", "$": "\ue005", "_": "_", "%": "%", "&": "&", "#": "#"}
_TILDE_NUMBER = re.compile(r"~(?=\d)")
_DOLLAR_AMOUNT = re.compile("\ue005(?=\\s?\\d)")
_MD_CODE = re.compile(r"`([^`\n]+)`")
_GAP_BREAK = re.compile(r"[.,;:()\[\]]")
_BOLD_MARK = re.compile(r"\\textbf\s*\{([^{}]*)\}|\*\*")
_BOLD_RAW = re.compile(r"\\textbf\s*\{([^{}]*)\}|\*\*([^*\n]+?)\*\*")
_MULTI_SPACE = re.compile(r"  +")
_SPACE_BEFORE_PUNCT = re.compile(r" (?=[,.;:!?%)\]’”])")
_SPACE_AFTER_OPEN = re.compile(r"([(\[“]) ")
_EMPTY_PARENS = re.compile(r"\(\s*[,;]?\s*\)|\[\s*\]")
_MISSING_SPACE = re.compile(r"[.!?](?=[A-Z][a-z])")
_DOUBLE_DOT = re.compile(r"(?<!\.)\.\.(?!\.)")

@dataclass
class Cleaned:
    text: str  # cleaned text; author macros still as sentinel characters
    macros: list[str]  # unresolved author macro names, sentinel i is chr(0xE100 + i)
    emph: set[str]  # strings the authors set in bold / italic / monospace
    acronyms: list[tuple[str, str]]  # (acronym, long form) spelled by bold initials


def _sentinel(i: int) -> str:
    return chr(0xE100 + i)


SENTINEL_RE = re.compile("[\ue100-\ue1ff]")


_ATOM = re.compile(r"[\w.′√⁰¹²³⁴⁵⁶⁷⁸⁹₀₁₂₃₄₅₆₇₈₉]+")  # needs no parentheses in a/b or √x


def _scripted(content: str, table: dict, mark: str) -> str:
    """Unicode super/subscript when every character has one, else a readable fallback."""
    content = content.strip()
    if content and all(c in table for c in content):
        return "".join(table[c] for c in content)
    if mark == "_":
        return "_" + content
    return "^" + (content if len(content) <= 1 else f"({content})")


def _styled(name: str, arg: str) -> str:
    """Apply a one-argument math font or accent command to its argument."""
    if name == "mathcal" or name == "mathscr":
        return "".join(SCRIPT_LETTERS.get(c, c) for c in arg)
    if name in ("mathbb", "mathds"):
        return "".join(DOUBLE_STRUCK.get(c, c) for c in arg)
    if name in COMBINING:
        stripped = arg.strip()
        if len(stripped) == 1:
            return unicodedata.normalize("NFC", stripped + COMBINING[name])
        return stripped
    if name == "sqrt":
        return "√" + (arg if _ATOM.fullmatch(arg) else f"({arg})")
    if name == "textsuperscript":
        return _scripted(arg, SUPERSCRIPT, "^")
    if name == "textsubscript":
        return _scripted(arg, SUBSCRIPT, "_")
    if name == "footnote":
        return f" ({arg})"
    return arg


def _two_arg(m: re.Match) -> str:
    name, a, b = m.group(1), m.group(2).strip(), m.group(3).strip()
    if name.endswith("frac"):
        a = a if _ATOM.fullmatch(a) else f"({a})"
        b = b if _ATOM.fullmatch(b) else f"({b})"
        return f"{a}/{b}"
    if name == "binom":
        return f"C({a}, {b})"
    if name == "href":
        return b if not b or a == b or _URL_TOKEN.fullmatch(b) else f"{b} ({a})"
    if name in ("overset", "underset", "stackrel"):
        return b
    return b  # textcolor, colorbox, fcolorbox: keep the text, drop the colour


def _math(src: str) -> str:
    """Render one math segment as plain Unicode."""
    s = src
    for _ in range(30):
        before = s
        s = _TWO_ARG.sub(_two_arg, s)
        s = _ONE_ARG.sub(_math_one_arg, s)
        s = _SCRIPT_BRACED.sub(_script_braced, s)
        if s == before:
            s = _BRACED.sub(r"\1", s)  # a plain group {x}: nothing left to expand inside it
        if s == before:
            break
    s = _SQRT_BARE.sub(r"√\1", s)
    s = _MACRO.sub(_math_macro, s)
    s = _SCRIPT_SINGLE.sub(_script_single, s)
    s = s.replace("{", "").replace("}", "").replace("\\", "")
    return " ".join(s.split())


def _math_one_arg(m: re.Match) -> str:
    name, arg = m.group(1), m.group(2)
    if name in DROP_WITH_ARG:
        return ""
    if name in GREEK or name in SYMBOLS:
        return (GREEK.get(name) or SYMBOLS[name]) + arg
    if name in ("operatorname", "mathrm", "text", "textrm", "mathop") and arg.strip():
        return arg
    return _styled(name, arg)


def _script_single(m: re.Match) -> str:
    return _scripted(m.group(2), SUPERSCRIPT if m.group(1) == "^" else SUBSCRIPT, m.group(1))


def _script_braced(m: re.Match) -> str:
    content = _MACRO.sub(_math_macro, m.group(2))
    return _scripted(content, SUPERSCRIPT if m.group(1) == "^" else SUBSCRIPT, m.group(1))


def _math_macro(m: re.Match) -> str:
    name = m.group(1)
    if name in GREEK:
        return GREEK[name]
    if name in SYMBOLS:
        return SYMBOLS[name]
    if name in DROP_MACROS:
        return ""
    if name in TEXT_MACROS:
        return TEXT_MACROS[name]
    return name  # \polylog, \softmax, \KL: the name reads fine as text


class _TextPass:
    """Text-mode macro expansion; records emphasis and unknown author macros."""

    def __init__(self) -> None:
        self.macros: list[str] = []
        self.emph: set[str] = set()

    def author_macro(self, name: str) -> str:
        if name not in self.macros:
            if len(self.macros) >= 255:
                return ""
            self.macros.append(name)
        return _sentinel(self.macros.index(name))

    def one_arg(self, m: re.Match) -> str:
        name, arg = m.group(1), m.group(2)
        if name in DROP_WITH_ARG:
            return ""
        if name in GREEK or name in SYMBOLS:
            return (GREEK.get(name) or SYMBOLS[name]) + arg
        if name in TEXT_MACROS:
            return TEXT_MACROS[name] + arg
        if name in EMPH_COMMANDS and arg.strip():
            self.emph.add(arg.strip())
        if name in KEEP_ARG or name in COMBINING:
            return _styled(name, arg)
        if name in DROP_MACROS:
            return arg
        if not arg.strip():
            return self.author_macro(name)  # \ours{} and friends
        return arg

    def macro(self, m: re.Match) -> str:
        name = m.group(1)
        if name in TEXT_MACROS:
            return TEXT_MACROS[name]
        if name in GREEK:
            return GREEK[name]
        if name in SYMBOLS:
            return SYMBOLS[name]
        if name in DROP_MACROS or name in DROP_WITH_ARG or name in KEEP_ARG:
            return ""
        return self.author_macro(name)

    def run(self, s: str) -> str:
        for _ in range(30 if "{" in s else 0):
            before = s
            s = _TWO_ARG.sub(_two_arg, s)
            s = _ONE_ARG.sub(self.one_arg, s)
            if s == before:
                break
        return _MACRO.sub(self.macro, s)


def _bold_acronyms(raw: str) -> list[tuple[str, str]]:
    """Acronyms spelled by bold initials: \\textbf{Co}ntrollable \\textbf{V}ide\\textbf{o} ... -> CoVo..."""
    pieces = []
    for m in _BOLD_RAW.finditer(raw):
        frag = m.group(1) if m.group(1) is not None else m.group(2)
        left = raw[m.start() - 1] if m.start() else " "
        right = raw[m.end()] if m.end() < len(raw) else " "
        if frag.isalnum() and (len(frag) <= 3 and (left.isalpha() or right.isalpha() or len(frag) == 1)
                               or right.isalpha() or left.isalpha()) and len(frag) <= 6:
            pieces.append((m.start(), m.end(), frag))
    groups, current = [], []
    for piece in pieces:
        if current:
            gap = raw[current[-1][1]:piece[0]]
            if len(gap.split()) > 4 or _GAP_BREAK.search(gap):
                groups.append(current)
                current = []
        current.append(piece)
    if current:
        groups.append(current)
    found = []
    for group in groups:
        acronym = "".join(p[2] for p in group)
        if len(group) < 2 or not 2 <= len(acronym) <= 15 or not any(c.isupper() for c in acronym):
            continue
        start = group[0][0]
        while start > 0 and (raw[start - 1].isalnum() or raw[start - 1] == "-"):
            start -= 1
        end = group[-1][1]
        while end < len(raw) and (raw[end].isalnum() or raw[end] == "-"):
            end += 1
        long_form = " ".join(_BOLD_MARK.sub(lambda x: x.group(1) or "", raw[start:end]).split())
        found.append((acronym, long_form))
    return found


def _markdown(s: str, emph: set[str]) -> str:
    """**bold**, __bold__, *italic*, _italic_, `code` -> their text; remember what was emphasised."""
    def inner(m: re.Match) -> str:
        text = m.group(1)
        emph.add(text.strip())
        return text

    if "**" in s:
        s = _MD_BOLD.sub(inner, s)
    if "__" in s:
        s = _MD_BOLD_UNDERSCORE.sub(inner, s)
    if "*" in s:
        s = _MD_ITALIC.sub(inner, s)
    if "_" in s:
        s = _MD_ITALIC_UNDERSCORE.sub(inner, s)
    if "`" in s and "``" not in s:  # ``quotes'' are LaTeX, not code
        s = _MD_CODE.sub(r"\1", s)
    return s


def _md_link(m: re.Match) -> str:
    label, url = m.group(1).strip(), m.group(2)
    if label.rstrip("/") in (url.rstrip("/"), "") or label.startswith("http"):
        return url
    return f"{label} ({url})"


def _stash_urls(s: str, urls: list[str]) -> str:
    """Swap URLs for placeholders so LaTeX and Markdown cleaning cannot touch them."""
    def stash(m: re.Match) -> str:
        url = _URL_ESCAPE.sub(r"\1", m.group(0))
        core = url.rstrip(URL_TRAIL)
        urls.append(core)
        return f"\ue001{len(urls) - 1}\ue001" + url[len(core):]

    if "http" in s or "www." in s:
        s = _URL_RAW.sub(stash, s)
    if ".com/" in s or ".co/" in s or ".org/" in s:
        s = _BARE_URL_RAW.sub(stash, s)
    return s


def _escape(m: re.Match) -> str:
    return _ESCAPED.get(m.group(1), " ")


def _missing_space(m: re.Match) -> str:
    """'avoidance.Our core' -> 'avoidance. Our core' (but leave 'e.g.The' and 'v1.Beta' alone)."""
    before = m.string[max(m.start() - 3, 0):m.start()]
    return m.group(0) + " " if len(before) == 3 and before.isalpha() and before.islower() else m.group(0)


def clean_markup(raw: str) -> Cleaned:
    """The cleaning pipeline; each step runs only when its trigger characters occur."""
    s = raw or ""
    if _PRIVATE.search(s):
        s = _PRIVATE.sub("", s)
    s = " ".join(s.split())
    acronyms = _bold_acronyms(s) if ("\\textbf" in s or "**" in s) else []
    if "](" in s:
        s = _MD_LINK.sub(_md_link, s)
    urls: list[str] = []
    if "http" in s or "www." in s or ".com/" in s or ".co/" in s or ".org/" in s:
        s = _stash_urls(s, urls)
    if "\\" in s:
        s = s.replace("\\\\", " ")
        s = _ESCAPES.sub(_escape, s)
        s = _ACCENT.sub(lambda m: unicodedata.normalize("NFC", (m.group(2) or m.group(3)) + ACCENTS[m.group(1)]), s)
    maths: list[str] = []
    if "$" in s or "\\(" in s or "\\[" in s:
        def stash_math(m: re.Match) -> str:
            maths.append(_math(next(g for g in m.groups() if g is not None)))
            return f"\ue002{len(maths) - 1}\ue002"

        s = _MATH.sub(stash_math, s).replace("$", "")
    passer = _TextPass()
    if "*" in s or "_" in s or "`" in s:
        s = _markdown(s, passer.emph)
    if "\\" in s:
        s = passer.run(s).replace("\\", "")
    if "-" in s or "`" in s or "'" in s:
        s = s.replace("---", "—").replace("--", "–").replace("``", "“").replace("''", "”")
    if "~" in s:
        s = _TILDE_NUMBER.sub("\ue006", s).replace("~", " ").replace("\ue006", "~")
    if "{" in s or "}" in s or "\ue003" in s:
        s = s.replace("{", "").replace("}", "").replace("\ue003", "{").replace("\ue004", "}")
    if "\ue005" in s:
        s = _DOLLAR_AMOUNT.sub("USD ", s).replace("\ue005", "")
    if maths:
        s = _MATH_TOKEN.sub(lambda m: maths[int(m.group(1))], s)
    if "  " in s:
        s = _MULTI_SPACE.sub(" ", s)
    if "(" in s or "[" in s:
        s = _EMPTY_PARENS.sub("", s)
    s = _SPACE_BEFORE_PUNCT.sub("", s)
    s = _SPACE_AFTER_OPEN.sub(r"\1", s)
    s = _MISSING_SPACE.sub(_missing_space, s)
    if ".." in s:
        s = _DOUBLE_DOT.sub(".", s)
    if urls:
        s = _URL_TOKEN.sub(lambda m: urls[int(m.group(1))], s)
    if "  " in s:
        s = _MULTI_SPACE.sub(" ", s)
    s = s.strip()
    emph = set()
    for e in passer.emph:
        if maths:
            e = _MATH_TOKEN.sub(lambda m: maths[int(m.group(1))], e)
        emph.add(" ".join(e.split()).strip("{} "))
    return Cleaned(s, passer.macros, emph, acronyms)


def scrub(s: str) -> str:
    """Last line of defence: nothing command-like, no `$`, no sentinel survives."""
    private = _PRIVATE.search(s)
    if not private and "\\" not in s and "$" not in s and "  " not in s:
        return s.strip()
    if private:
        s = _PRIVATE.sub("", s)
    if "\\" in s or "$" in s:
        s = _BACKSLASH_ANY.sub(lambda m: m.group(0).lstrip("\\"), s).replace("\\", "").replace("$", "")
    return " ".join(s.split())


_TITLE_TAIL = re.compile(r"((?:[A-Z][\w\-]*\s+(?:(?:of|for|and|with|in|on|via|the|to)\s+)?){1,7}[A-Z][\w\-]*)$")
_PLACEHOLDER_MACRO = re.compile(r"(?i)name|method|alg|ours|model|propos|approach|system|framework|tool|bench|data")


def resolve_macros(text: str, macros: list[str], acronyms: list[tuple[str, str]], title_name: str | None) -> str:
    """Replace unexpanded author macros (\\ourmes, \\alg) with the best name available."""
    for i, macro in enumerate(macros):
        sent = _sentinel(i)
        if sent not in text:
            continue
        text = re.sub(f"[“\"‘']+{sent}[”\"’']+", sent, text)
        name = None
        define = re.search(rf"\(\s*{sent}\s*\)", text)
        if define:
            before = text[:define.start()].rstrip()
            for acronym, long_form in acronyms:
                if long_form and before.endswith(long_form):
                    name = acronym
            if name is None:
                tail = re.search(rf"({NAME_TOKEN})$", before)
                phrase = _TITLE_TAIL.search(before)
                if phrase and len(phrase.group(1).split()) >= 2:
                    name = phrase.group(1)
                elif tail and is_namey(strip_token(tail.group(1))):
                    name = strip_token(tail.group(1))
                if name is not None:  # "Long Form (\macro)": the long form is the name; drop the echo
                    text = text[:define.start()].rstrip() + text[define.end():]
        if name is None and len(macros) == 1 and len(acronyms) == 1:
            name = acronyms[0][0]
        placeholder = _PLACEHOLDER_MACRO.search(macro)
        if name is None and macro[:1].isupper() and not placeholder:
            name = macro  # \DETOCS, \MLP, \Winogender: the macro spells its own name
        if name is None and title_name:
            name = title_name
        text = text.replace(sent, name) if name is not None else _neutral_macro(text, sent, macro)
    return text


def _neutral_macro(text: str, sent: str, macro: str) -> str:
    """No name anywhere: 'the proposed <noun>', or drop it before its own appositive."""
    noun = "method"
    heads = "|".join(NOUN_HEADS)
    appos = re.search(rf"{sent},\s+(?:a|an|the)\s+(?:[\w\-]+\s+){{0,4}}?({heads})\b", text)
    if appos:
        noun = appos.group(1)
    else:
        for key, value in (("bench", "benchmark"), ("data", "dataset"), ("model", "model"),
                           ("net", "network"), ("alg", "algorithm"), ("agent", "agent"),
                           ("sys", "system"), ("frame", "framework")):
            if key in macro.lower():
                noun = value
                break
    text = re.sub(rf"{sent},\s+(?=(?:a|an)\s)", "", text, count=1)
    text = re.sub(rf"\b(the|our|this|its|their|a|an)\s+{sent}\s+(?=(?:{heads})\b)", r"\1 proposed ", text, flags=re.I)
    text = re.sub(rf"{sent}\s+(?=(?:{heads})\b)", "the proposed ", text)
    text = re.sub(rf"\b(the|our|this|a|an)\s+{sent}", rf"\1 proposed {noun}", text, flags=re.I)
    text = re.sub(rf"(^|[.!?]\s+){sent}", rf"\1The proposed {noun}", text)
    return text.replace(sent, f"the proposed {noun}")


def clean_text(raw: str) -> str:
    """LaTeX/Markdown residue -> readable Unicode text; author macros resolved to a name or phrase."""
    cleaned = clean_markup(raw)
    text = cleaned.text
    if cleaned.macros:
        text = resolve_macros(text, cleaned.macros, cleaned.acronyms, None)
    return scrub(text)
