#!/bin/sh
# Doxygen INPUT_FILTER (docs/Doxyfile): hides the versioned inline namespace
# (`inline namespace v0 {` ... `}  // namespace v0`) so the reference names each
# entity as users write it, gpudyn::heap_ref; Doxygen otherwise names some
# gpudyn::v0::x and others gpudyn::x.  Lines are blanked, not removed, so line
# numbers stay those of the header.
exec sed -e 's/^inline namespace v0 {$//' -e 's|^}  // namespace v0$||' "$1"
