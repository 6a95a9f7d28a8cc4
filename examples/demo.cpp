#include "tensorgrad/tensorgrad.h"
int main() { return 0; }
