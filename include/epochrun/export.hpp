// EPOCHRUN_API marks what libepochrun.so exports. The library is compiled with hidden
// visibility (-fvisibility=hidden -fvisibility-inlines-hidden), so a class or function of the
// public headers that programs, jobs and job libraries call or link against is marked; an
// exception class or a class with virtual functions is marked too, so that its typeinfo and
// vtable are one across the boundary (a catch in a program must match a throw in the library).
// tests/exported_symbols_test.sh checks that nothing else is exported.
#pragma once

#define EPOCHRUN_API __attribute__((visibility("default")))
// For a private nested class of an EPOCHRUN_API class (a pimpl's Impl), which would otherwise
// take the enclosing class's default visibility and export the library's internals.
#define EPOCHRUN_HIDDEN __attribute__((visibility("hidden")))
