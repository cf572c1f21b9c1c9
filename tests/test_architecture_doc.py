"""docs/architecture.md stays true: every path and module it names exists, and every shipped node, config section,
schema class and error class appears in it (with its exit code and HTTP status)."""

from __future__ import annotations

import importlib.util
import inspect
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "architecture.md").read_text()
SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
PACKAGE_DIR: dict[str, str] = SETUPTOOLS["package-dir"]
# top-level names a path in the doc may start with: the mapped layer folders and what lies beside them
TOP_LEVEL = {p.name for p in ROOT.iterdir() if not p.name.startswith(".")} | {".ci"}
PATH = re.compile(r"`([A-Za-z_.][\w./-]*/[\w./-]*|[\w-]+\.(?:py|md|toml|json|yml|yaml|txt|sh))`")
MODULE = re.compile(r"`(switchyard(?:\.\w+)+)`")


def _source_folder(package: str) -> Path | None:
    """The repository folder a dotted package name maps to (pyproject's package-dir), or None."""
    parents = [p for p in PACKAGE_DIR if package == p or package.startswith(p + ".")]
    if not parents:
        return None
    parent = max(parents, key=len)
    return ROOT / PACKAGE_DIR[parent] / Path(*package[len(parent) :].split(".")[1:])


def _module_exists(dotted: str) -> bool:
    """A module, package or a name defined in one (switchyard.errors.UsageError) that the source tree holds."""
    parts = dotted.split(".")
    for cut in range(len(parts), 1, -1):
        head, rest = ".".join(parts[:cut]), parts[cut:]
        folder = _source_folder(head)
        if folder is not None and folder.is_dir():
            return not rest or _defines(folder / "__init__.py", rest)
        parent = _source_folder(".".join(parts[: cut - 1]))
        if parent is not None and (parent / f"{parts[cut - 1]}.py").is_file():
            return not rest or _defines(parent / f"{parts[cut - 1]}.py", rest)
    return False


def _defines(module_file: Path, names: list[str]) -> bool:
    text = module_file.read_text()
    return len(names) == 1 and re.search(rf"^(class|def|async def)?\s*{names[0]}\b", text, re.M) is not None


def _doc_paths() -> set[str]:
    paths = set()
    for match in PATH.finditer(DOC):
        path = match.group(1).rstrip("/.")
        first = path.split("/")[0]
        if "/" in path and first not in TOP_LEVEL:
            continue  # a URL path (/v1/ask) or a folder of another tool
        if path.rsplit("/", 1)[-1].startswith("my"):
            continue  # the Extending section's examples (nodes/mynode.py)
        paths.add(path)
    return paths


def _in_layout_block() -> str:
    return DOC.split("## Layout", 1)[1].split("```", 2)[1]


def test_every_path_the_doc_names_exists():
    paths = _doc_paths()
    assert len(paths) > 40, "the path pattern found too few paths: is it still matching the doc?"
    missing = []
    for path in sorted(paths):
        if "/" in path:
            candidates = [ROOT / path]
        else:  # a bare file name: some folder of the tree holds it
            candidates = list(ROOT.glob(f"*/{path}")) + list(ROOT.glob(f"*/*/{path}")) + [ROOT / path]
        if not any(c.exists() for c in candidates):
            missing.append(path)
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"


def test_every_module_the_doc_names_exists():
    modules = set(MODULE.findall(DOC))
    assert modules, "the doc names no switchyard.… module"
    missing = sorted(m for m in modules if not _module_exists(m))
    assert not missing, f"docs/architecture.md names modules that do not exist: {missing}"


def _source_modules() -> dict[str, list[str]]:
    """Each mapped source folder (package/, graphs/, service/routes/, …) and its module files."""
    folders: dict[str, list[str]] = {}
    for package in SETUPTOOLS["packages"]:
        folder = _source_folder(package)
        assert folder is not None and folder.is_dir(), f"pyproject lists {package}, which maps to no folder"
        modules = sorted(p.name for p in folder.glob("*.py") if p.name != "__init__.py")
        folders[str(folder.relative_to(ROOT)) + "/"] = modules
    return folders


def test_every_layout_folder_lists_its_modules():
    layout = _in_layout_block()
    unlisted = []
    for folder, modules in _source_modules().items():
        assert folder in layout, f"the Layout block does not show the folder {folder}"
        # the folder's own entry runs from its name to the next folder entry at the line's start
        entry = layout.split(folder, 1)[1]
        entry = re.split(r"\n(?=\S)", entry, maxsplit=1)[0]
        for module in modules:
            if module.removesuffix(".py") not in entry:
                unlisted.append(folder + module)
    assert not unlisted, f"the Layout block does not mention these modules in their folder's entry: {unlisted}"


def test_every_node_of_every_shipped_graph_appears():
    nodes = set()
    for snapshot in (ROOT / "tests" / "graphs" / "snapshots").glob("*.txt"):
        for line in snapshot.read_text().splitlines():
            if line.startswith("node ") and not line.startswith("node __"):
                nodes.add(line.split()[1])
    assert {"rewrite", "retrieve", "rerank", "grade", "answer", "router"} <= nodes
    missing = sorted(n for n in nodes if f"**{n}**" not in DOC and f"`nodes/{n}.py`" not in DOC)
    assert not missing, f"shipped graph nodes missing from docs/architecture.md: {missing}"


def test_every_config_section_and_schema_class_appears():
    from switchyard.configs import schema

    sections = schema.SwitchyardConfig.model_fields
    missing = [f"section `{name}`" for name in sections if f"`{name}`" not in DOC]
    classes = [
        name
        for name, obj in vars(schema).items()
        if inspect.isclass(obj)
        and obj.__module__ == schema.__name__
        and name.endswith("Config")
        and not name.startswith("_")
        and issubclass(obj, schema.BaseModel)
    ]
    assert len(classes) > 10
    missing += [f"class `{name}`" for name in classes if f"`{name}`" not in DOC]
    assert not missing, f"docs/architecture.md misses config sections / schema classes: {missing}"


def _error_classes() -> list[type]:
    from switchyard import errors

    return [
        obj
        for obj in vars(errors).values()
        if inspect.isclass(obj) and issubclass(obj, errors.SwitchyardError) and obj.__module__ == errors.__name__
    ]


def _table_rows(heading: str) -> list[list[str]]:
    section = DOC.split(heading, 1)[1].split("\n## ", 1)[0]
    return [[c.strip() for c in line.strip("|").split("|")] for line in section.splitlines() if line.startswith("|")]


@pytest.mark.parametrize("error", _error_classes(), ids=lambda c: c.__name__)
def test_every_error_class_appears_with_its_codes(error):
    rows = [row for row in _table_rows("## Errors") if re.search(rf"`{error.__name__}`", row[0])]
    assert rows, f"the Errors table has no row for {error.__name__}"
    row = rows[0]
    if error.__name__ == "SwitchyardError":
        return
    exit_code, http = row[2], row[3]
    if error.__name__ != "ServiceError":
        assert str(error.exit_code) in exit_code, f"{error.__name__}: exit code {error.exit_code} not in '{exit_code}'"
        assert str(error.http_status) in http, f"{error.__name__}: HTTP {error.http_status} not in '{http}'"


def test_the_checks_find_what_is_wrong(tmp_path, monkeypatch):
    """The checks above are not vacuous: a doc naming a missing path or module, or missing a node, fails them."""
    global DOC
    original = DOC
    try:
        DOC = original + "\n`retrievers/no_such_module.py` and `switchyard.nodes.no_such_module`\n"
        with pytest.raises(AssertionError, match="no_such_module.py"):
            test_every_path_the_doc_names_exists()
        with pytest.raises(AssertionError, match="switchyard.nodes.no_such_module"):
            test_every_module_the_doc_names_exists()
        DOC = original.replace("**grade**", "grade").replace("`nodes/grade.py`", "")
        with pytest.raises(AssertionError, match="grade"):
            test_every_node_of_every_shipped_graph_appears()
    finally:
        DOC = original
    assert importlib.util.find_spec("switchyard") is not None
