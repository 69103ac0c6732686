// The AMD path of flash_forward.cu (FMA tiles, one stage, 32-row blocks) on the emulator.
#define BACKPLANE_GPU_AMD 1
#include "emulated_flash.cpp"
