"""Load models from Python files (``models/*.py``).

A model file defines, at module level, one of (looked up in this order):

* ``MODELS``: a list or tuple of models, each with a distinct ``.name``;
* ``MODEL``: one model object;
* ``model()``: a function of no arguments returning one model.

The file is executed as a fresh module of a private package standing for its directory
(registered in ``sys.modules`` so dataclasses and pickling work): a model reaches the files
next to it by relative import (``from .guarded import variants``), wherever it is run from;
its other imports resolve through ``sys.path`` as usual. Those modules stay registered,
with every model they define and what checking those models memoised, until
:func:`unload_models` drops them. Every problem surfaces as
:class:`ModelLoadError`, its message naming the file; when the model's code raised, a
second line names the line that did (``at FILE:LINE, in FUNCTION: SOURCE``). Whatever the
model's code raised is its failure, ``SystemExit`` and pytest's ``Skipped``
(``pytest.importorskip``) included; only an interruption (Ctrl-C:
:func:`~fsm.checker.location.interrupts`) passes through.

A directory stands for the model files in it (:func:`model_files`): every ``*.py`` file
directly inside (not in subdirectories) whose name starts with neither ``_`` nor
``test_`` and is not pytest's ``conftest``, in name order. Each must define a model: helpers
the models import go in files named ``_*.py``.

The models shipped with the library (the repository's ``models/``, installed as the
package ``fsm.models``) are found by name: :func:`builtin_models` lists them,
:func:`builtin_model_file` gives the file of one (``fsm check --builtin NAME``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import types
from pathlib import Path as FilePath
from typing import Any

from fsm.checker.location import Location, interrupts, raised_at, what_raised
from fsm.checker.model import Model, model_name, resolve_hooks


class ModelLoadError(Exception):
    """The file is missing, fails to import, or defines no valid model; ``location``: the
    line of the model's code that raised, if any."""

    def __init__(self, message: str, location: Location | None = None) -> None:
        full = message if location is None else f"{message}\n  {location.format_text()}"
        super().__init__(full)
        self.location = location


def is_model_file(name: str) -> bool:
    """Whether a file named ``name`` in a directory of models is a model file: ``*.py``,
    not ``_*.py``, ``test_*.py`` or pytest's ``conftest``."""
    return name.endswith(".py") and not name.startswith(("_", "test_")) and name != "conftest.py"


def model_files(path: str) -> list[str]:
    """The model files ``path`` stands for: itself if it is a file; if it is a directory,
    its model files (:func:`is_model_file`) in name order, ModelLoadError if it has none;
    ModelLoadError if it does not exist."""
    folder = FilePath(path)
    if folder.is_file():
        return [path]
    if not folder.is_dir():
        raise ModelLoadError(f"{path}: no such model file or directory")
    files = sorted(f for f in folder.iterdir() if f.is_file() and is_model_file(f.name))
    if not files:
        raise ModelLoadError(
            f"{path}: no model files in this directory (a model file is a *.py file whose"
            " name starts with neither _ nor test_)"
        )
    return [str(f) for f in files]


def builtin_models_dir() -> FilePath:
    """The directory of the shipped models: the installed package ``fsm.models`` (or, in
    a source checkout that is not installed, the checkout's ``models/``)."""
    spec = importlib.util.find_spec("fsm.models")
    if spec is not None and spec.submodule_search_locations:
        return FilePath(next(iter(spec.submodule_search_locations)))
    return FilePath(__file__).resolve().parents[2] / "models"


def builtin_models() -> list[str]:
    """The names of the shipped model files (``guarded``, ``seed_incident``, ...)."""
    folder = builtin_models_dir()
    return sorted(f.stem for f in folder.glob("*.py") if is_model_file(f.name))


def builtin_model_file(name: str) -> str:
    """The file of the shipped model ``name`` (ModelLoadError naming the known ones)."""
    known = builtin_models()
    if name not in known:
        raise ModelLoadError(f"no shipped model {name!r}; known: {', '.join(known)}")
    return str(builtin_models_dir() / f"{name}.py")


_PACKAGE_PREFIX = "_fsm_models_"


def _package_for(folder: FilePath) -> str:
    """A private package whose ``__path__`` is ``folder``: relative imports of a model
    file resolve to the files next to it."""
    name = _PACKAGE_PREFIX + hashlib.sha1(str(folder).encode()).hexdigest()[:12]
    if name not in sys.modules:
        package = types.ModuleType(name, f"the model files in {folder}")
        package.__path__ = [str(folder)]
        package.__package__ = name
        sys.modules[name] = package
    return name


def _import_file(path: str) -> Any:
    file = FilePath(path)
    if file.is_dir():
        raise ModelLoadError(
            f"{path}: a directory, not a model file (model_files() lists the model files in it;"
            " fsm check DIR checks them all)"
        )
    if not file.is_file():
        raise ModelLoadError(f"{path}: no such model file")
    file = file.resolve()
    module_name = f"{_package_for(file.parent)}.{file.stem}"
    spec = importlib.util.spec_from_file_location(module_name, file)
    if spec is None or spec.loader is None:
        raise ModelLoadError(f"{path}: not a loadable Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:  # SystemExit, pytest's Skipped: the file's failure too
        sys.modules.pop(module_name, None)
        if interrupts(exc):
            raise
        raise ModelLoadError(f"{path}: import failed: {what_raised(exc)}", raised_at(exc)) from exc
    return module


def unload_models() -> int:
    """Drop from ``sys.modules`` every module :func:`load_models` registered (the private
    packages standing for model directories and the model files in them); returns how many.

    For a long-lived process that loads models again and again (a test session, a
    notebook): a registered model file keeps its models alive, and with them what checking
    them memoised (interned states, a policy's decisions), often hundreds of MB. Models
    already loaded stay usable, and what only they hold is freed when they are; the next
    load executes the files afresh, the files they import by relative import included."""
    names = [n for n in list(sys.modules) if n.startswith(_PACKAGE_PREFIX)]
    return sum(sys.modules.pop(name, None) is not None for name in names)


def load_models(path: str) -> list[Model[Any, Any]]:
    """All models defined by the file at ``path`` (see the module docstring)."""
    module = _import_file(path)
    try:
        if hasattr(module, "MODELS"):
            models = list(module.MODELS)
        elif hasattr(module, "MODEL"):
            models = [module.MODEL]
        elif callable(getattr(module, "model", None)):
            models = [module.model()]
        else:
            raise ModelLoadError(f"{path}: defines none of MODELS, MODEL or model()")
    except ModelLoadError:
        raise
    except BaseException as exc:
        if interrupts(exc):
            raise
        raise ModelLoadError(f"{path}: building the model failed: {exc!r}", raised_at(exc)) from exc
    if not models:
        raise ModelLoadError(f"{path}: MODELS is empty")
    for m in models:
        try:
            resolve_hooks(m)
        except TypeError as exc:
            raise ModelLoadError(f"{path}: {exc}") from exc
        except BaseException as exc:  # a hook the model runs to declare itself raised
            if interrupts(exc):
                raise
            raise ModelLoadError(
                f"{path}: reading the model's hooks failed: {exc!r}", raised_at(exc)
            ) from exc
    names = [model_name(m) for m in models]
    if len(set(names)) != len(names):
        raise ModelLoadError(f"{path}: models need distinct names, got {names}")
    return models


def load_model(path: str, name: str | None = None) -> Model[Any, Any]:
    """The model called ``name`` in the file at ``path``, or its only model if ``name`` is None."""
    models = load_models(path)
    if name is None:
        if len(models) > 1:
            names = ", ".join(model_name(m) for m in models)
            raise ModelLoadError(f"{path}: defines several models ({names}); pass name=")
        return models[0]
    for m in models:
        if model_name(m) == name:
            return m
    raise ModelLoadError(f"{path}: no model named {name!r}")
