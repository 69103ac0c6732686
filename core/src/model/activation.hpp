// transformers.activations.ACT2CLS: the module a config's activation name (hidden_act)
// instantiates. Read by the Llama-family table and by descriptors whose activation module
// follows a config field.
#pragma once

#include <backplane/model/model.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace backplane::model_detail {

// The module `name` that activation `activation` builds, with the state some hold (PReLU's
// weight, XIELU's alphas); nullopt for a name ACT2CLS does not have.
std::optional<Module> activation_module(std::string_view activation, std::string name, DType dtype);

// The Hub layer name use_kernels looks activation class `class_name` up under ("SiLU" for
// SiLUActivation); empty for a class that is not kernelizable or not an activation.
std::string_view activation_kernel_layer(std::string_view class_name);

// The names ACT2CLS accepts, comma-separated, for errors.
std::string activation_names();

}  // namespace backplane::model_detail
