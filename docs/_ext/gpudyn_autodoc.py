"""autodoc for what gpudyn exports that autodoc does not document by itself.

* gpudyn.numba's device functions are numba-cuda intrinsics (objects made by
  ``@intrinsic``, not Python functions): documented as functions, with the signature
  of the intrinsic's definition less its typing context.
* Constants a module imports and lists in ``__all__`` (``gpudyn.numba.INVALID_PAGE``,
  ``gpudyn.library_path``): autodoc documents data only where the module assigns it;
  these are documented with their value, never with their type's docstring.
* Deprecated aliases (their docstring starts with "Deprecated:") are left out.
"""
from __future__ import annotations

import inspect
import types

from sphinx.ext.autodoc import DataDocumenter, FunctionDocumenter, ModuleDocumenter


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
        return (membername in exported and not callable(member) and not isinstance(member, types.ModuleType)
                and not membername.startswith("_"))

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


def setup(app):
    app.setup_extension("sphinx.ext.autodoc")
    app.connect("autodoc-skip-member", _skip_deprecated)
    app.add_autodocumenter(IntrinsicDocumenter)
    app.add_autodocumenter(ExportedDataDocumenter)
    return {"parallel_read_safe": True}
