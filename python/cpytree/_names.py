"""The one table of cpytree's names: which are public and where each comes from.

Derived from here, at run time:

* `__all__` of `cpytree` and of `cpytree._reference`: `PUBLIC`;
* what `import cpytree` loads on first use (`LAZY`, through `LAZY_HOME`: the
  module `__getattr__` of cpytree/__init__.py);
* the reference's namespace (`cpytree._reference` re-exports `SHARED` and
  the lazy modules' names, as torch's single module has them all).

Written out by hand and checked against this table: what `import cpytree`
binds from the modules it shares with the reference (`SHARED`) and from the
engine or else the reference (`ENGINE`, two branches of `if _C is not None:`)
are explicit imports in cpytree/__init__.py, because they are what type
checkers read, as are the `TYPE_CHECKING` declarations of `LAZY`.
tests/python/test_names.py checks every such import against this table,
what the package binds in both branches (the reference's in a child process
without the extension), and `_C.pyi` against the runtime `_C` and `ENGINE`.

Names defined by cpytree/__init__.py itself are `PACKAGE`. To add a public
name, see docs/recipe_public_name.md.
"""

from __future__ import annotations

# torch's __all__ of every supported release (2.10-2.11 list FlattenFunc and
# UnflattenFunc, 2.12+ FlattenFn and UnflattenFn: _releases.DIFFERENCES
# ["fn_type_names"]), plus the key entry names.
PUBLIC: tuple[str, ...] = (
    "Context", "DumpableContext", "FlattenFn", "FlattenFunc", "FromDumpableContextFn",
    "GetAttrKey", "KeyEntry", "KeyPath", "LeafSpec", "MappingKey", "PyTree", "PyTreeSpec",
    "SequenceKey", "ToDumpableContextFn", "TreeSpec", "UnflattenFn", "UnflattenFunc",
    "is_namedtuple", "is_namedtuple_class", "is_namedtuple_instance", "is_structseq",
    "is_structseq_class", "is_structseq_instance",
    "key_get", "keystr", "register_pytree_node", "tree_all", "tree_all_only", "tree_any",
    "tree_any_only", "tree_flatten", "tree_flatten_with_path", "tree_is_leaf", "tree_iter",
    "tree_leaves", "tree_leaves_with_path", "tree_map", "tree_map_", "tree_map_only",
    "tree_map_only_", "tree_map_with_path", "tree_structure", "tree_unflatten",
    "treespec_dumps", "treespec_loads", "treespec_pprint",
)  # fmt: skip

# Loaded by `import cpytree` and shared with the reference: module -> names.
SHARED: dict[str, tuple[str, ...]] = {
    "_nodes": (
        "BUILTIN_TYPES", "STANDARD_DICT_TYPES", "Py_TPFLAGS_BASETYPE",
        "_defaultdict_deserialize", "_defaultdict_flatten", "_defaultdict_flatten_with_keys",
        "_defaultdict_serialize", "_defaultdict_unflatten",
        "_deque_flatten", "_deque_flatten_with_keys", "_deque_unflatten",
        "_dict_flatten", "_dict_flatten_with_keys", "_dict_unflatten",
        "_get_node_type", "_is_namedtuple_instance",
        "_list_flatten", "_list_flatten_with_keys", "_list_unflatten",
        "_namedtuple_deserialize", "_namedtuple_flatten", "_namedtuple_flatten_with_keys",
        "_namedtuple_serialize", "_namedtuple_unflatten",
        "_odict_flatten", "_odict_unflatten",
        "_ordereddict_flatten", "_ordereddict_flatten_with_keys", "_ordereddict_unflatten",
        "_register_namedtuple",
        "_tuple_flatten", "_tuple_flatten_with_keys", "_tuple_unflatten",
        "is_namedtuple", "is_namedtuple_class", "is_namedtuple_instance",
        "is_structseq", "is_structseq_class", "is_structseq_instance", "structseq",
    ),
    "_registry": (
        "_NODE_REGISTRY_LOCK", "_REGISTRATION_HOOKS", "CONSTANT_NODES",
        "NO_SERIALIZED_TYPE_NAME_FOUND", "SERIALIZED_TYPE_TO_PYTHON_TYPE", "SUPPORTED_NODES",
        "SUPPORTED_SERIALIZED_TYPES", "ConstantNode", "Context", "DumpableContext",
        "FlattenFn", "FlattenFunc", "FlattenWithKeysFn", "FlattenWithKeysFunc",
        "FromDumpableContextFn", "MaybeFromStrFunc", "NodeDef", "PyTree",
        "ToDumpableContextFn", "ToStrFunc", "TypeAny", "UnflattenFn", "UnflattenFunc",
        "_deregister_pytree_node", "_private_register_pytree_node", "_register_pytree_node",
        "_SerializeNodeDef", "is_constant_class", "register_constant", "register_dataclass",
        "register_pytree_node",
    ),
    "_derived": ("map_only",),
}  # fmt: skip

# Loaded on first use (a module __getattr__), so `import cpytree` does not pay
# for them: module -> names. The key entry classes (the engine asks for them
# on its first with-path call: cpytree._engine), serialization (the engine
# asks on its first dumps/loads; treespec_loads and str_to_pytree are bound
# to the package's TreeSpec), and the three helpers of torch's module that
# only the reference defines (with the reference itself, "_reference").
LAZY: dict[str, tuple[str, ...]] = {
    "_keys": ("GetAttrKey", "KeyEntry", "KeyPath", "MappingKey", "SequenceKey"),
    "_serialization": (
        "DEFAULT_TREESPEC_SERIALIZATION_PROTOCOL", "EnumEncoder", "_asterisk",
        "_treespec_to_json", "_TreeSpecSchema", "enum_object_hook", "pytree_to_str",
        "treespec_pprint", "treespec_loads", "str_to_pytree",
    ),
    "_reference": ("_generate_key_paths", "_is_constant_holder", "_retrieve_constant"),
}  # fmt: skip

# The engine's functions: package name -> attribute of `cpytree._C` (with the
# engine), else the reference's function of the same name.
ENGINE: dict[str, str] = {
    name: name
    for name in (
        "TreeSpec", "arg_tree_leaves", "key_get", "keystr", "tree_flatten",
        "tree_flatten_with_path", "tree_is_leaf", "tree_iter", "tree_leaves",
        "tree_leaves_with_path", "tree_map", "tree_map_", "tree_map_only", "tree_map_only_",
        "tree_map_with_path", "tree_structure", "tree_unflatten", "treespec_dumps",
    )
}  # fmt: skip

# Defined by cpytree/__init__.py itself (LeafSpec: the reference's without the
# engine; the derived helpers bound to the package's TreeSpec and traversals;
# install() & co. from cpytree._torch), not by the reference.
PACKAGE: tuple[str, ...] = (
    "ENGINE", "LeafSpec", "PyTreeSpec", "_broadcast_to_and_flatten", "_is_leaf",
    "_is_pytreespec_instance", "install", "is_installed", "status", "tree_all",
    "tree_all_only", "tree_any", "tree_any_only", "treespec_dict", "treespec_leaf",
    "treespec_tuple", "uninstall",
)  # fmt: skip

# Read from their home on every access, never bound (a module __getattr__ in
# the package and the reference): the home rebinds them. `_registry` swaps in
# torch's lock when the two registries join (cpytree._torch_link._sync), so
# a copy bound at import would be a lock nothing else takes.
LIVE: frozenset[str] = frozenset({"_NODE_REGISTRY_LOCK"})

# name -> the module it is loaded from on first use.
LAZY_HOME: dict[str, str] = {name: module for module, names in LAZY.items() for name in names}
