// IOTWIN_TEST_ASAN: defined when AddressSanitizer instruments this build. Its shadow memory and
// per-thread state add memory of their own, so tests that bound a process's memory check the
// bound in the build without it. gcc says so with __SANITIZE_ADDRESS__, clang with
// __has_feature(address_sanitizer).
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define IOTWIN_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define IOTWIN_TEST_ASAN 1
#endif
#endif
