// Everything a host application needs from backplane.
#pragma once

#include <backplane/device.hpp>
#include <backplane/device_info.hpp>
#include <backplane/error.hpp>
#include <backplane/runtime.hpp>
#include <backplane/selection.hpp>
#include <backplane/units.hpp>
#include <backplane/version.hpp>
