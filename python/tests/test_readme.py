"""The README's Python example, run as written (its asserts are its checks)."""

import os
import pathlib
import re


def readme():
    env = os.environ.get("MEMQ_README")
    if env:
        return pathlib.Path(env)
    return pathlib.Path(__file__).resolve().parents[2] / "README.md"


def test_readme_python_example():
    text = readme().read_text()
    section = text.split("\n## Python\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert blocks, "no python example in the README's Python section"
    for code in blocks:
        exec(compile(code, "README.md", "exec"), {"__name__": "readme"})
