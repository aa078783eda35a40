"""autodoc for what gpudyn exports that autodoc does not document by itself.

* gpudyn.numba's device functions are numba-cuda intrinsics (objects made by
  ``@intrinsic``, not Python functions): documented as functions, with the signature
  of the intrinsic's definition less its typing context.
* Constants a module imports and lists in ``__all__`` (``gpudyn.numba.INVALID_PAGE``,
  ``gpudyn.library_path``): autodoc documents data only where the module assigns it;
  these are documented with their value, never with their type's docstring.
* Deprecated aliases (their docstring starts with "Deprecated:") are left out, and
  base classes from private modules are not named.
"""

from __future__ import annotations

import importlib
import inspect
import types

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.ext.autodoc import DataDocumenter, FunctionDocumenter, ModuleDocumenter
from sphinx.util.docutils import SphinxDirective

TYPING_MODULE = "gpudyn._typing"


def _is_intrinsic(obj) -> bool:
    return type(obj).__name__ == "_Intrinsic" and callable(getattr(obj, "_defn", None))


class IntrinsicDocumenter(FunctionDocumenter):
    objtype = "intrinsic"
    directivetype = "function"
    priority = FunctionDocumenter.priority + 10

    @classmethod
    def can_document_member(cls, member, membername, isattr, parent):
        return _is_intrinsic(member)

    def format_args(self, **kwargs):
        sig = inspect.signature(self.object._defn)
        params = list(sig.parameters.values())[1:]  # the typing context is numba's, not the caller's
        return str(sig.replace(parameters=params, return_annotation=inspect.Signature.empty))


class ExportedDataDocumenter(DataDocumenter):
    objtype = "exporteddata"
    directivetype = "data"
    priority = DataDocumenter.priority + 10

    @classmethod
    def can_document_member(cls, member, membername, isattr, parent):
        if not isinstance(parent, ModuleDocumenter) or isattr:
            return False
        exported = getattr(parent.object, "__all__", ())
        return (
            membername in exported
            and not callable(member)
            and not isinstance(member, types.ModuleType)
            and not membername.startswith("_")
        )

    def get_doc(self):
        doc = self.get_module_comment(self.objpath[-1])
        return doc or [[]]


def is_deprecated(obj) -> bool:
    """gpudyn's deprecated aliases (python/gpudyn/_deprecated.py) say so first in their docstring."""
    doc = getattr(obj, "__doc__", None) or ""
    return doc.lstrip().startswith("Deprecated:")


def _skip_deprecated(app, what, name, obj, skip, options):
    if is_deprecated(obj):
        return True  # listed in the changelog with its replacement, not in the reference
    return None


def _public_bases(app, name, obj, options, bases):
    # A structure's base class is plumbing (gpudyn._handle.OwnedHandle): its public
    # methods are documented on the structure (inherited-members), the base is not named.
    def private(b) -> bool:
        return any(part.startswith("_") for part in (getattr(b, "__module__", "") or "").split("."))

    public: list = []
    todo = list(bases)
    while todo:
        b = todo.pop(0)
        if private(b) and isinstance(b, type):
            todo[:0] = list(b.__bases__)  # named by what it derives from (object)
        elif b not in public:
            public.append(b)
    bases[:] = public


def _typing_names() -> list[str]:
    try:
        module = importlib.import_module(TYPING_MODULE)
    except ImportError:
        return []
    return list(getattr(module, "__all__", ()))


class TypeAliases(SphinxDirective):
    """The names the signatures use for what a call accepts (StreamLike, ArrayLike,
    ...; gpudyn/_typing.py), each with its comment; nothing where the installed
    package has no such module."""

    has_content = False

    def run(self):
        names = _typing_names()
        if not names:
            return []
        from sphinx.pycode import ModuleAnalyzer

        # The #: comments as written (autodata would hand them to napoleon, which reads
        # "A CUDA stream: None, ..." as a type and its description).
        docs = ModuleAnalyzer.for_module(TYPING_MODULE).find_attr_docs()
        lines = []
        for name in names:
            lines += [f".. py:data:: {TYPING_MODULE}.{name}", ""]
            lines += ["   " + line for line in docs.get(("", name), [])] + [""]
        container = nodes.container()
        self.state.nested_parse(StringList(lines, source=self.get_source_info()[0]), self.content_offset, container)
        return list(container.children)


def _config_inited(app, config):
    # Signatures name the aliases (stream: StreamLike), linked to TypeAliases' entries,
    # rather than what they stand for (Any).
    config.autodoc_type_aliases = {
        **{n: f"{TYPING_MODULE}.{n}" for n in _typing_names()},
        **config.autodoc_type_aliases,
    }


def setup(app):
    app.setup_extension("sphinx.ext.autodoc")
    app.add_directive("gpudyn-type-aliases", TypeAliases)
    app.connect("config-inited", _config_inited)
    app.connect("autodoc-skip-member", _skip_deprecated)
    app.connect("autodoc-process-bases", _public_bases)
    app.add_autodocumenter(IntrinsicDocumenter)
    app.add_autodocumenter(ExportedDataDocumenter)
    return {"parallel_read_safe": True}
