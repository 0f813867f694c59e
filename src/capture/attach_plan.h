// The attach plan of one BPF object: for each of its programs in the attach table
// (attach_table.h), the method this capture uses, chosen from the table and the probe of this
// process (Features::Get), and the libbpf steps that load only that variant of each program.
#pragma once

#include <bpf/libbpf.h>

#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "base/status.h"
#include "capture/attach_table.h"

namespace iotwin::capture {

// tp_btf program name -> method.
using AttachPlan = std::map<std::string, AttachMethod, std::less<>>;

// The plan of `object`'s programs: `forced` where a row offers it and the kernel allows it, else
// each row's best method the kernel allows (its first when none: the load error then explains).
AttachPlan PlanObject(std::string_view object, AttachMethod forced);
// Moves every program of `plan` to its row's next method; false when none has one left.
bool DemotePlan(std::string_view object, AttachPlan* plan);
// Turns autoload on for `base`'s variant of method `chosen` and off for its other variants
// (kNone: off for all). `base` is a table name, or a sibling that shares its row's method.
void SelectVariant(bpf_object* obj, std::string_view base, AttachMethod chosen);
// Selects every program's planned variant in `obj`.
void SelectPlan(bpf_object* obj, const AttachPlan& plan);
// `base`'s variant of method `m` in `obj`, or null.
bpf_program* FindVariant(bpf_object* obj, std::string_view base, AttachMethod m);
// The methods the plan uses, each once: "tp_btf", "raw_tp", "tp_btf, raw_tp".
std::string DescribePlan(const AttachPlan& plan);

// What LoadByPlan loaded with.
struct PlannedLoad {
  AttachPlan plan;     // the plan that loaded
  Status first_error;  // why the first plan did not load; ok when it did
  // "<what>: attached as raw_tp after: <first line of first_error>", or "" when the first plan
  // loaded.
  std::string FallbackNote(std::string_view what) const;
};

// The one load-with-fallback loop of every loader: plans `object` (PlanObject, with
// IOTWIN_ATTACH's forced method) and calls `load` with the plan; while `load` fails, moves every
// program to its row's next method (DemotePlan) and calls it again. `load` leaves nothing loaded
// when it fails. The first error (the one worth showing) when no plan loads.
Result<PlannedLoad> LoadByPlan(std::string_view object,
                               const std::function<Status(const AttachPlan&)>& load);

}  // namespace iotwin::capture
