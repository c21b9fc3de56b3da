#include "readers.hpp"
