// The one source of allocguard_pch (cmake/precompiled_headers.cmake), the
// target whose precompiled header the others reuse.
