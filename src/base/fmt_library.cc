// fmt's out-of-line functions (float formatting, vformat, locale), compiled once here.
//
// Debian ships fmt as headers plus a shared libfmt.so only; the header-only mode compiled these
// functions into every file that formats (about a third of each file's compile time), and the
// shared library cannot go into iotwin-static. Including format-inl.h without FMT_HEADER_ONLY
// defines them as ordinary functions; the two templates format.h declares `extern` for char are
// instantiated below (wchar_t is never formatted here).
#include <fmt/format-inl.h>

FMT_BEGIN_NAMESPACE
namespace detail {
template auto thousands_sep_impl<char>(locale_ref) -> thousands_sep_result<char>;
template auto decimal_point_impl(locale_ref) -> char;
}  // namespace detail
FMT_END_NAMESPACE
