#include "capture/attach_plan.h"

#include <algorithm>
#include <cerrno>
#include <vector>

#include "capture/features.h"
#include "capture/libbpf_log.h"

namespace iotwin::capture {

AttachPlan PlanObject(std::string_view object, AttachMethod forced, const RowFilter& wanted) {
  return PlanObjectFor(Features::Get(), object, forced, wanted);
}

AttachPlan PlanObjectFor(const Features& features, std::string_view object, AttachMethod forced,
                         const RowFilter& wanted) {
  AttachPlan plan;
  for (const ProgramAttach& row : AttachTable()) {
    if (row.object != object) continue;
    AttachMethod m = AttachMethod::kNone;
    if (!wanted || wanted(row)) {
      m = features.ChooseAttach(row, forced);
      // None the probe approves: a required program is tried by its best method anyway (the
      // load or attach error then explains); an optional one stays out.
      if (m == AttachMethod::kNone && row.required) m = row.methods[0];
    }
    plan[std::string(row.program)] = m;
  }
  return plan;
}

// Moves every program of `plan` to its row's next method; false when none has one left.
bool DemotePlan(std::string_view object, AttachPlan* plan) {
  bool moved = false;
  for (auto& [program, method] : *plan) {
    const ProgramAttach* row = FindAttach(object, program);
    if (!row) continue;
    for (size_t i = 0; i + 1 < row->methods.size(); i++) {
      if (row->methods[i] == method && row->methods[i + 1] != AttachMethod::kNone) {
        method = row->methods[i + 1];
        moved = true;
        break;
      }
    }
  }
  return moved;
}

// Loads only the chosen variant of each planned program: `base` names the program family (the
// table's tp_btf name, or a sibling such as iot_proc_exit_legacy that shares its row's method).
void SelectVariant(bpf_object* obj, std::string_view base, AttachMethod chosen) {
  for (AttachMethod m : {AttachMethod::kTpBtf, AttachMethod::kRawTp, AttachMethod::kTracepoint}) {
    bpf_program* prog = bpf_object__find_program_by_name(obj, ProgramVariant(base, m).c_str());
    if (prog) bpf_program__set_autoload(prog, m == chosen);
  }
}

// "tp_btf", or "tp_btf, raw_tp" when the programs of the plan attach in more than one way.
std::string DescribePlan(const AttachPlan& plan) {
  std::vector<std::string> kinds;
  for (const auto& [program, method] : plan) {
    if (method == AttachMethod::kNone) continue;
    std::string name(AttachMethodName(method));
    if (std::find(kinds.begin(), kinds.end(), name) == kinds.end()) kinds.push_back(name);
  }
  std::string out;
  for (const auto& k : kinds) out += (out.empty() ? "" : ", ") + k;
  return out;
}

void SelectPlan(bpf_object* obj, const AttachPlan& plan) {
  for (const auto& [program, method] : plan) SelectVariant(obj, program, method);
}

std::string PlannedLoad::FallbackNote(std::string_view what) const {
  if (first_error.ok()) return "";
  const std::string& why = first_error.message();
  return fmt::format("{}: attached as {} after: {}", what, DescribePlan(plan),
                     why.substr(0, why.find('\n')));
}

namespace {

// LoadByPlan's loop, from the first plan on.
Result<PlannedLoad> LoadPlanned(std::string_view object,
                                const std::function<Status(const AttachPlan&)>& load,
                                PlannedLoad done) {
  while (true) {
    Status st = load(done.plan);
    if (st.ok()) return done;
    if (done.first_error.ok()) done.first_error = st;
    if (!DemotePlan(object, &done.plan)) return done.first_error;
  }
}

}  // namespace

Result<PlannedLoad> LoadByPlan(std::string_view object,
                               const std::function<Status(const AttachPlan&)>& load,
                               const RowFilter& wanted) {
  IOTWIN_ASSIGN_OR_RETURN(AttachMethod forced, ForcedAttachMethod());
  PlannedLoad done{PlanObject(object, forced, wanted), Status::Ok()};
  const bool any = std::any_of(done.plan.begin(), done.plan.end(), [](const auto& planned) {
    return planned.second != AttachMethod::kNone;
  });
  if (any) return LoadPlanned(object, load, std::move(done));
  std::string left_out;
  for (const auto& planned : done.plan) {
    const ProgramAttach* row = FindAttach(object, planned.first);
    if (row) left_out += fmt::format("{}{}", left_out.empty() ? "" : ", ", row->tracepoint);
  }
  return Status::Unsupported("none of the {} programs is wanted or attachable here ({})", object,
                             left_out);
}


AttachOutcome AttachPlanned(bpf_object* obj, std::string_view object, const AttachPlan& plan,
                            std::vector<bpf_link*>* links) {
  AttachOutcome out;
  bpf_program* prog = nullptr;
  bpf_object__for_each_program(prog, obj) {
    if (!bpf_program__autoload(prog)) continue;  // a variant or program the plan left out
    AttachMethod method = AttachMethod::kNone;
    const ProgramAttach* row = RowOfSection(object, bpf_program__section_name(prog), &method);
    auto planned = row ? plan.find(row->program) : plan.end();
    if (planned == plan.end() || planned->second != method) {
      if (out.required.ok()) {
        out.required = Status::Internal("the {} program {} ({}) is not in its attach plan", object,
                                        bpf_program__name(prog), bpf_program__section_name(prog));
      }
      continue;
    }
    bpf_link* link = bpf_program__attach(prog);
    if (link) {
      links->push_back(link);
      continue;
    }
    Status st = LibbpfError(errno, fmt::format("attaching {} as {}", row->tracepoint,
                                               AttachMethodName(method)));
    if (!row->required) {
      const std::string& why = st.message();
      out.missed.push_back(why.substr(0, why.find('\n')));
    } else if (out.required.ok()) {
      out.required = st;
    }
  }
  return out;
}

}  // namespace iotwin::capture
