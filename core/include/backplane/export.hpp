// Symbol visibility for libbackplane: everything is hidden unless marked BACKPLANE_API.
#pragma once

#if defined(_WIN32)
#define BACKPLANE_API __declspec(dllexport)
#else
#define BACKPLANE_API __attribute__((visibility("default")))
#endif
