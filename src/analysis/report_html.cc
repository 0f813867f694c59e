#include "analysis/report_html.h"

#include <algorithm>
#include <cctype>

#include "analysis/html_assets.h"

namespace iotwin::analysis {
namespace {

// Installed before the libraries, so that every error on the page is counted where a test (or a
// person) can see it: <html data-errors="N"> and the #iotwin-errors block.
constexpr std::string_view kErrorCapture = R"JS(
(function () {
  var errors = [];
  window.iotwinError = function (msg) {
    errors.push(String(msg));
    document.documentElement.setAttribute('data-errors', String(errors.length));
    var pre = document.getElementById('iotwin-errors');
    if (pre) { pre.textContent = errors.join('\n'); pre.style.display = 'block'; }
  };
  window.addEventListener('error', function (e) {
    window.iotwinError('error: ' + e.message + ' (' + e.filename + ':' + e.lineno + ')');
  });
  window.addEventListener('unhandledrejection', function (e) {
    window.iotwinError('unhandled rejection: ' + (e.reason && e.reason.message ? e.reason.message : e.reason));
  });
  var consoleError = console.error.bind(console);
  console.error = function () {
    window.iotwinError(Array.prototype.map.call(arguments, String).join(' '));
    consoleError.apply(null, arguments);
  };
})();
)JS";

std::string HtmlEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// A library's text made safe to inline: no "</script" that would end the element early, and no
// source-map comment pointing at a file the page does not have.
void AppendScript(std::string& html, std::string_view js) {
  html += "<script>";
  size_t i = 0;
  while (i < js.size()) {
    size_t lt = js.find('<', i);
    size_t map = js.find("//# sourceMappingURL=", i);
    size_t next = std::min(lt, map);
    if (next == std::string_view::npos) {
      html.append(js.substr(i));
      break;
    }
    html.append(js.substr(i, next - i));
    if (next == map) {
      size_t eol = js.find('\n', next);
      i = eol == std::string_view::npos ? js.size() : eol;
      continue;
    }
    std::string_view rest = js.substr(next);
    bool closing = rest.size() >= 8 && rest[1] == '/' &&
                   std::equal(rest.begin() + 2, rest.begin() + 8, "script",
                              [](char a, char b) { return std::tolower(a) == b; });
    html += closing ? "<\\/" : "<";
    i = next + (closing ? 2 : 1);
  }
  html += "</script>\n";
}

}  // namespace

std::string JsonForScript(const nlohmann::json& j) {
  std::string text = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out;
  out.reserve(text.size() + 64);
  for (char c : text) {
    switch (c) {
      case '<': out += "\\u003c"; break;
      case '>': out += "\\u003e"; break;
      case '&': out += "\\u0026"; break;
      default: out += c;
    }
  }
  return out;
}

Result<std::string> RenderHtml(const nlohmann::json& model) {
  return RenderHtml(model, GetHtmlAssets());
}

Result<std::string> RenderHtml(const nlohmann::json& model, const HtmlAssets& a) {
  if (!a.plotting_available) {
    std::string why = a.missing_reason.empty() ? std::string("web/node_modules was missing")
                                               : std::string(a.missing_reason);
    return Status::Unsupported(
        "this iotwin was built without the plotting libraries that --html embeds (vega, "
        "vega-lite, vega-embed from the npm registry; at configure time: {}): run `npm ci "
        "--prefix web` in the source tree, reconfigure and rebuild; report's text and --json "
        "output need nothing more",
        why);
  }
  std::string name = "trace";
  if (model.contains("trace") && model["trace"].contains("path") &&
      model["trace"]["path"].is_string()) {
    name = model["trace"]["path"].get<std::string>();
    if (size_t slash = name.rfind('/'); slash != std::string::npos) name = name.substr(slash + 1);
  }
  std::string html;
  html.reserve(a.vega.size() + a.vega_lite.size() + a.vega_embed.size() + (1 << 20));
  html += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  html += "<meta name=\"generator\" content=\"iotwin report (";
  html += HtmlEscape(a.versions);
  html += ")\">\n<title>iotwin report: " + HtmlEscape(name) + "</title>\n<style>\n";
  html.append(a.report_css);
  html += "</style>\n";
  AppendScript(html, kErrorCapture);
  AppendScript(html, a.vega);
  AppendScript(html, a.vega_lite);
  AppendScript(html, a.vega_embed);
  html += "</head>\n<body>\n<header><h1>iotwin report</h1><div class=\"sub\" id=\"subtitle\"></div>"
          "</header>\n<pre id=\"iotwin-errors\" class=\"warn\" style=\"display:none\"></pre>\n"
          "<main id=\"main\"></main>\n<script type=\"application/json\" id=\"iotwin-model\">";
  html += JsonForScript(model);
  html += "</script>\n";
  AppendScript(html, a.report_js);
  html += "</body>\n</html>\n";
  return html;
}

}  // namespace iotwin::analysis
