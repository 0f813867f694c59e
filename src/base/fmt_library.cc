// fmt's out-of-line functions (float formatting, vformat, locale), compiled once here.
//
// Debian ships fmt as headers plus a shared libfmt.so only; the header-only mode compiled these
// functions into every file that formats (about a third of each file's compile time), and the
// shared library cannot go into iotwin-static. Including format-inl.h without FMT_HEADER_ONLY
// defines the non-template functions as ordinary ones; the templates that format.h only declares
// are instantiated explicitly below for char (wchar_t is never formatted here), so that no
// definition depends on what the compiler happened to inline in this file.
#include <fmt/format-inl.h>

#if FMT_VERSION < 90000 || FMT_VERSION >= 100000
#error "fmt_library.cc instantiates fmt 9's internals; other fmt versions need their own list"
#endif

FMT_BEGIN_NAMESPACE
namespace detail {
template auto dragonbox::to_decimal(float x) noexcept -> dragonbox::decimal_fp<float>;
template auto dragonbox::to_decimal(double x) noexcept -> dragonbox::decimal_fp<double>;
template locale_ref::locale_ref(const std::locale& loc);
template auto locale_ref::get<std::locale>() const -> std::locale;
template auto thousands_sep_impl<char>(locale_ref) -> thousands_sep_result<char>;
template auto decimal_point_impl(locale_ref) -> char;
}  // namespace detail
FMT_END_NAMESPACE
