"""The tokenization text set: ASCII, Unicode, code, whitespace runs, emoji, numbers, specials."""

TEXTS = [
    # ASCII prose and punctuation
    "Hello world",
    " Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "It's a well-known fact: don't panic! (Really?) Yes -- \"quotes\", 'apostrophes'; semi-colons.",
    "I've been 'there'; you'll see, they're here, we'd go, she'll've done it.",
    "UPPER lower MiXeD CamelCaseWords snake_case_words kebab-case-words",
    "",
    " ",
    "a",
    # Unicode: accents, CJK, Cyrillic, Arabic, Greek, Hindi, Korean, Japanese, Thai
    "Café naïve façade coöperate résumé Ångström Zürich",
    "中文测试：你好，世界！这是一个分词测试。",
    "Привет, мир! Съешь же ещё этих мягких французских булок.",
    "مرحبا بالعالم، هذا اختبار للتجزئة.",
    "Γειά σου Κόσμε — ελληνικά",
    "नमस्ते दुनिया, यह एक परीक्षण है।",
    "안녕하세요 세계, 토크나이저 테스트입니다.",
    "日本語のテキスト、ひらがなとカタカナと漢字。",
    "ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ",
    "\u00a0non-breaking\u2009thin\u200bzero-width\ufeffbom",
    # Code with indentation
    "def f(x):\n    if x > 0:\n        return x * 2\n    return -x\n",
    "int main(void) {\n\tfor (int i = 0; i < 10; ++i) {\n\t\tprintf(\"%d\\n\", i);\n\t}\n}\n",
    "```python\nimport numpy as np\narr = np.zeros((3, 4), dtype=np.float32)\n```",
    "{\"key\": [1, 2.5, -3e10, null, true], \"nested\": {\"a\": \"b\"}}",
    "<html><body class=\"main\">&amp; &lt;tag&gt;</body></html>",
    # Whitespace runs
    "two  spaces   three    four     five",
    "   leading spaces",
    "trailing spaces   ",
    "\t\ttabs\tand\t\tmore tabs",
    "line one\nline two\n\nline four\n\n\n\nline eight",
    "\r\nwindows\r\nline endings\r\n",
    "mixed \t \n \t\n  whitespace \n\t ",
    "\n",
    "\n\n\n",
    "                                                                ",
    # Emoji, including ZWJ sequences, skin tones, flags, keycaps
    "I love pizza 🍕 and sushi 🍣!",
    "👨‍👩‍👧‍👦 family, 👩🏽‍💻 technologist, 🏳️‍🌈 flag",
    "🇫🇷 🇯🇵 🇺🇸 flags and 1️⃣ 2️⃣ keycaps",
    "😀😃😄😁😆😅🤣😂🙂🙃",
    "❤️ ✨ ⭐ ☀️ ⚡",
    # Numbers
    "3.14159 2.71828 1e-10 -42 +7 1,000,000 0x1F 0b1010",
    "1 12 123 1234 12345 123456 1234567 12345678 123456789",
    "Call 555-0123 on 2024-03-15 at 10:30am; order #98765.",
    "v1.2.3-rc.4 build 20240315",
    # Mixed, odd bytes, and special-token look-alikes
    "<s> inside text </s> and <unk> and <start_of_turn>user\nhi<end_of_turn>",
    "ʼ ʻ ‘ ’ “ ” « » ‹ › … – —",
    "ａｂｃ ＡＢＣ １２３ fullwidth",
    "Mathematical: ∀x ∈ ℝ, ∃y: x² + y² ≤ 1 → ∑ᵢ aᵢ ≈ ∫ f(x) dx",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
]
