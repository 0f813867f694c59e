// `iotwin anonymize`: replace every name in a trace by a keyed hash (src/interop/anonymize.h,
// docs/interop.md).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/bytes_text.h"
#include "cli/commands.h"
#include "cli/stdout_output.h"
#include "interop/anonymize.h"

namespace iotwin::cli {

CommandSpec SetupAnonymize(CLI::App& parent) {
  struct Options {
    std::string input, output, key, new_key;
    bool keep_extensions = false;
    bool json = false;
    std::vector<std::string> keep_prefixes;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* sub = parent.add_subcommand(
      "anonymize",
      "Replace path components, comms, arguments, labels and host name by keyed hashes");
  sub->add_option("trace", opt->input, "trace to anonymize");
  sub->add_option("-o,--output", opt->output, "anonymized trace to write ('-' for stdout)");
  sub->add_option("--key", opt->key,
                  "file with the secret key (>= 16 bytes; --new-key makes one); the same key "
                  "gives the same tokens across traces");
  sub->add_option("--new-key", opt->new_key,
                  "create FILE holding a new random key (mode 0600; never overwrites), then "
                  "anonymize with it if a trace is given");
  sub->add_flag("--json", opt->json,
                "print what was replaced as one JSON object on stdout (schema iotwin-anonymize/1)");
  sub->add_flag("--keep-extensions", opt->keep_extensions,
                "keep file extensions (model.safetensors -> <token>.safetensors)");
  sub->add_option("--keep-prefix", opt->keep_prefixes,
                  "absolute path prefix kept verbatim besides /proc, /sys and /dev (repeatable)");
  return {sub, [opt] {
            if (!opt->new_key.empty()) {
              if (!opt->key.empty()) {
                fmt::print(stderr, "iotwin anonymize: give --key or --new-key, not both\n");
                return kExitError;
              }
              Status st = interop::Anonymizer::CreateKeyFile(opt->new_key);
              if (!st.ok()) {
                fmt::print(stderr, "iotwin anonymize: {}\n", st.message());
                return kExitError;
              }
              fmt::print(stderr, "iotwin anonymize: new key in {} (keep it secret; the same key "
                         "gives the same tokens)\n", opt->new_key);
              if (opt->input.empty() && opt->output.empty()) return kExitOk;
              opt->key = opt->new_key;
            }
            if (opt->input.empty() || opt->output.empty()) {
              fmt::print(stderr, "iotwin anonymize: a trace and -o OUTPUT are required\n");
              return kExitError;
            }
            if (opt->key.empty()) {
              fmt::print(stderr, "iotwin anonymize: --key FILE is required; make one with "
                         "`iotwin anonymize --new-key FILE`\n");
              return kExitError;
            }
            interop::AnonymizeOptions ao;
            ao.keep_extensions = opt->keep_extensions;
            for (const auto& p : opt->keep_prefixes) {
              if (p.empty() || p[0] != '/') {
                fmt::print(stderr, "iotwin anonymize: --keep-prefix wants an absolute path, got '{}'\n", p);
                return kExitError;
              }
            }
            ao.keep_prefixes = opt->keep_prefixes;
            auto a = interop::Anonymizer::FromKeyFile(opt->key, ao);
            if (!a.ok()) {
              fmt::print(stderr, "iotwin anonymize: {}\n", a.status().message());
              return kExitError;
            }
            if (opt->input == opt->output) {
              fmt::print(stderr, "iotwin anonymize: output must differ from input\n");
              return kExitError;
            }
            std::string output = opt->output;
            auto to_stdout = StdoutOutput::For(&output, "-o", /*binary=*/true);
            if (!to_stdout.ok() || (*to_stdout && opt->json)) {
              fmt::print(stderr, "iotwin anonymize: {}\n",
                         to_stdout.ok() ? "-o - writes the trace to standard output: no --json there"
                                        : to_stdout.status().message());
              return kExitError;
            }
            auto r = interop::AnonymizeTrace(opt->input, output, *a);
            if (!r.ok()) {
              fmt::print(stderr, "iotwin anonymize: {}\n", r.status().message());
              return kExitError;
            }
            if (*to_stdout) {
              Status copied = (*to_stdout)->CopyToStdout();
              if (!copied.ok()) {
                fmt::print(stderr, "iotwin anonymize: -o -: {}\n", copied.message());
                return kExitError;
              }
            }
            if (opt->json) {
              nlohmann::json j = {{"schema", "iotwin-anonymize/1"},
                                  {"output", BytesToText(opt->output)},
                                  {"records", r->records},
                                  {"strings", r->strings},
                                  {"unknown_records_dropped", r->unknown_records_dropped},
                                  {"meta_keys_dropped", r->meta_keys_dropped},
                                  {"input_truncated", r->input_truncated}};
              fmt::print("{}\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
            }
            fmt::print(stderr, "iotwin anonymize: {} records, {} strings -> {}\n", r->records,
                       r->strings, opt->output);
            if (r->unknown_records_dropped) {
              fmt::print(stderr, "  {} records of unknown types dropped (they could hold names)\n",
                         r->unknown_records_dropped);
            }
            if (!r->meta_keys_dropped.empty()) {
              fmt::print(stderr, "  header keys dropped: {}\n", fmt::join(r->meta_keys_dropped, ", "));
            }
            if (r->input_truncated) fmt::print(stderr, "  warning: the input trace is truncated\n");
            return kExitOk;
          }};
}

}  // namespace iotwin::cli
