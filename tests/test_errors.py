"""The error family: every error raised on purpose is a SwitchyardError whose class carries its CLI exit code and
HTTP status, and the edges map errors by type only."""

from __future__ import annotations

import inspect

import pytest

from switchyard import errors
from switchyard.errors import (
    EXIT_FAIL,
    EXIT_USAGE,
    CollectionNotFound,
    ConfigError,
    FilterError,
    LLMError,
    QuestionError,
    StoreError,
    SwitchyardError,
    UnknownPipeline,
)

FAMILY = [c for _, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, SwitchyardError)]


class TestFamily:
    def test_every_class_carries_an_exit_code_and_a_status(self):
        assert len(FAMILY) > 15
        for cls in FAMILY:
            assert cls.exit_code in (EXIT_FAIL, EXIT_USAGE) and 400 <= cls.http_status <= 599, cls

    @pytest.mark.parametrize(
        "cls, code, status",
        [
            (ConfigError, EXIT_USAGE, 400),
            (FilterError, EXIT_USAGE, 400),
            (QuestionError, EXIT_FAIL, 400),
            (StoreError, EXIT_FAIL, 409),
            (CollectionNotFound, EXIT_FAIL, 404),
            (LLMError, EXIT_FAIL, 502),
        ],
    )
    def test_codes_by_class(self, cls, code, status):
        assert (cls.exit_code, cls.http_status) == (code, status)

    def test_builtin_bases_are_kept(self):
        assert issubclass(ConfigError, ValueError) and issubclass(StoreError, RuntimeError)
        assert issubclass(UnknownPipeline, KeyError) and str(UnknownPipeline("x", ["a"])).startswith("unknown pipeline")

    def test_one_dataset_error(self):
        from switchyard.evaluation.datasets import DatasetError as A
        from switchyard.evaluation.retrieval import DatasetError as B

        assert A is B is errors.DatasetError

    def test_no_module_defines_its_own_error_class(self):
        import pathlib

        root = pathlib.Path(errors.__file__).parent
        own = []
        for path in root.glob("*/*.py"):
            if path.parts[-2] in ("tests", "bench", ".venv", "docs"):
                continue
            for line in path.read_text().splitlines():
                if line.startswith("class ") and ("Error(" in line or "Exception)" in line):
                    own.append(f"{path.relative_to(root)}: {line}")
        assert own == [], own


class TestEdgesMapByType:
    def test_the_service_status(self):
        from switchyard.service.error_responses import status_of

        assert status_of(CollectionNotFound("collection 'x' does not exist")) == 404
        assert status_of(StoreError("something else does not exist")) == 409  # the type decides, not the text
        assert status_of(QuestionError("the question is empty")) == 400
        assert status_of(LLMError("unreachable")) == 502
        assert status_of(KeyError("x")) == 500

    def test_the_cli_exit_code(self, capsys, monkeypatch):
        from switchyard import cli

        def fail(exc):
            def command(args):
                raise exc

            return command

        for exc, code in [(ConfigError("bad key"), 2), (CollectionNotFound("gone"), 1), (FilterError("f"), 2)]:
            monkeypatch.setitem(cli.COMMANDS, "list", fail(exc))
            assert cli.main(["list"]) == code
            assert capsys.readouterr().err == f"error: {exc}\n"

    def test_a_run_error_event_names_our_errors_plainly(self):
        from switchyard.graphs.pipeline import error_message

        assert error_message(LLMError("server down\ndetails")) == "server down"
        assert error_message(ZeroDivisionError("division by zero")) == "ZeroDivisionError: division by zero"
