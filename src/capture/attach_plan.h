// The attach plan of one BPF object: for each of its programs in the attach table
// (attach_table.h), the method this capture uses, chosen from the table and the probe of this
// process (Features::Get), the libbpf steps that load only that variant of each program, and the
// one load loop (LoadByPlan) and one attach step (AttachPlanned) every loader goes through.
#pragma once

#include <bpf/libbpf.h>

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "capture/attach_table.h"

namespace iotwin::capture {

class Features;

// tp_btf program name -> method; kNone: the program stays unloaded.
using AttachPlan = std::map<std::string, AttachMethod, std::less<>>;

// Whether this capture wants a row's program at all (a memory part that is off, a job another
// object does); null: every row.
using RowFilter = std::function<bool(const ProgramAttach&)>;

// The plan of `object`'s programs: kNone for a row `wanted` turns down; else `forced` where the
// row offers it and the kernel allows it, else the row's first method the kernel allows
// (Features::ChooseAttach, the one fallback order). A row no method of which the kernel allows
// keeps its first method when the layer needs it (the load error then explains) and is left out
// when it is optional (as `iotwin check` says: "without ...").
AttachPlan PlanObject(std::string_view object, AttachMethod forced, const RowFilter& wanted = {});
// The same for the kernel `features` describe (PlanObject: Features::Get(), this process's probe).
AttachPlan PlanObjectFor(const Features& features, std::string_view object, AttachMethod forced,
                         const RowFilter& wanted = {});
// Moves every program of `plan` to its row's next method; false when none has one left.
bool DemotePlan(std::string_view object, AttachPlan* plan);
// Turns autoload on for `base`'s variant of method `chosen` and off for its other variants
// (kNone: off for all). `base` is a table name, or a sibling that shares its row's method.
void SelectVariant(bpf_object* obj, std::string_view base, AttachMethod chosen);
// Selects every program's planned variant in `obj`.
void SelectPlan(bpf_object* obj, const AttachPlan& plan);
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
// IOTWIN_ATTACH's forced method and `wanted`) and calls `load` with the plan; while `load` fails,
// moves every program to its row's next method (DemotePlan) and calls it again. `load` leaves
// nothing loaded when it fails. The first error (the one worth showing) when no plan loads; an
// Unsupported error, without calling `load`, when the plan leaves every program out.
Result<PlannedLoad> LoadByPlan(std::string_view object,
                               const std::function<Status(const AttachPlan&)>& load,
                               const RowFilter& wanted = {});

// What AttachPlanned did with one object.
struct AttachOutcome {
  Status required;                  // the first program the layer needs that did not attach
  std::vector<std::string> missed;  // the optional ones that did not: "group:event: why"
  bool complete() const { return required.ok() && missed.empty(); }
};

// The one attach step of every loader: attaches each program `obj` loaded, in the object's
// order, by the method its section names, after checking it against `object`'s row in the
// attach table and the plan it loaded with (a program with no row, or loaded by another method
// than planned, is an internal error). The links go to *links, also when something failed (the
// caller destroys them); every program is tried.
AttachOutcome AttachPlanned(bpf_object* obj, std::string_view object, const AttachPlan& plan,
                            std::vector<bpf_link*>* links);

}  // namespace iotwin::capture
