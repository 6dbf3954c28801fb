// A setup file that gives model code the built-in calculator tool (a real arithmetic parser, no
// eval): `rlm run --setup examples/calculator.ts --context numbers.txt "What is the total?"`
import { calculatorTool, echoTool } from 'rlm';

export const tools = [calculatorTool, echoTool];
