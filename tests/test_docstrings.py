"""The docstring examples of every albert_tf module run as tests, so a wrong example fails.

Every `.py` file under albert_tf/ is imported and its examples are collected by
`doctest.DocTestFinder` and run by `doctest.DocTestRunner` (ELLIPSIS on); a failure names the
module, the example and what it printed. Nothing is excluded here: an example that needs data
files, a released model or the network carries `# doctest: +SKIP` in the module itself (it is
still compiled, so it cannot hold a syntax error), and a docstring line starting with `>>>`
that doctest would not collect (e.g. in a nested function) fails the test.

The examples run in a fresh temporary working directory, with `tempfile` creating its files
under it too, so they leave nothing in the repository or in /tmp. That directory holds
`30k-clean.model`, the name of the released models' SentencePiece file: a tiny stand-in with
the same special ids (<pad>=0, <unk>=1, [CLS]=2, [SEP]=3, [MASK]=4), so examples may tokenize.
"""

import ast
import doctest
import importlib
import pathlib
import shutil
import tempfile

import keras
import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "albert_tf"
STAND_IN_SPM_MODEL = "30k-clean.model"


def _module_names():
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def _example_lines_in_docstrings(path):
    """Number of lines starting with `>>>` in all docstrings of a file (any nesting)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    count = 0
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            docstring = ast.get_docstring(node, clean=False) or ""
            count += sum(line.lstrip().startswith(">>>") for line in docstring.splitlines())
    return count


@pytest.fixture
def doctest_directory(tmp_path, monkeypatch, spm_model_file):
    shutil.copyfile(spm_model_file, tmp_path / STAND_IN_SPM_MODEL)
    (tmp_path / "tempfile").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tempfile"))
    policy = keras.mixed_precision.global_policy()
    try:
        yield tmp_path
    finally:
        keras.mixed_precision.set_global_policy(policy)


def test_every_module_is_listed():
    names = _module_names()
    assert "albert_tf" in names and "albert_tf.models.backbone" in names
    assert len(names) == len(set(names))


@pytest.mark.parametrize("module_name", _module_names())
def test_docstring_examples(module_name, doctest_directory):
    module = importlib.import_module(module_name)
    tests = [
        t for t in doctest.DocTestFinder(exclude_empty=True).find(module, module_name) if t.examples
    ]
    found = sum(len(t.examples) for t in tests)
    written = _example_lines_in_docstrings(pathlib.Path(module.__file__))
    assert found == written, (
        f"{module_name}: {written} docstring lines start with '>>>' but doctest collects "
        f"{found} examples; move examples into docstrings doctest finds (module, class, "
        "function or method)"
    )
    report = []
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in tests:
        for example in test.examples:
            if example.options.get(doctest.SKIP):
                compile(example.source, f"<{test.name} (skipped example)>", "single")
        runner.run(test, out=report.append)
    if runner.failures:
        pytest.fail(
            f"{runner.failures} of {runner.tries} docstring examples of {module_name} "
            "failed:\n" + "".join(report),
            pytrace=False,
        )
