// Clang thread-safety annotations: which lock guards which data, and which functions need,
// take or must not hold it, stated in the code and checked by clang's -Wthread-safety
// (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html). Under gcc they expand to nothing.
//
// Data: GUARDED_BY(mu) on a member read or written only with `mu` held; PT_GUARDED_BY(mu) on a
// pointer whose pointee is. Functions: REQUIRES(mu) (the caller holds it), EXCLUDES(mu) (the
// caller must not: the function takes it), ACQUIRE / RELEASE / TRY_ACQUIRE (lock functions).
// NO_THREAD_SAFETY_ANALYSIS turns the check off for one function; a comment there says why
// its unlocked accesses are safe. Locks are iotwin::Mutex (base/mutex.h): std::mutex carries
// no capability attributes in libstdc++, so the analysis cannot see it.
#pragma once

#if defined(__clang__)
#define IOTWIN_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define IOTWIN_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) IOTWIN_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY IOTWIN_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) IOTWIN_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) IOTWIN_THREAD_ANNOTATION(pt_guarded_by(x))
#define ACQUIRED_BEFORE(...) IOTWIN_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define ACQUIRED_AFTER(...) IOTWIN_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define REQUIRES(...) IOTWIN_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define ACQUIRE(...) IOTWIN_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) IOTWIN_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) IOTWIN_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define EXCLUDES(...) IOTWIN_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define ASSERT_CAPABILITY(x) IOTWIN_THREAD_ANNOTATION(assert_capability(x))
#define RETURN_CAPABILITY(x) IOTWIN_THREAD_ANNOTATION(lock_returned(x))
#define NO_THREAD_SAFETY_ANALYSIS IOTWIN_THREAD_ANNOTATION(no_thread_safety_analysis)
