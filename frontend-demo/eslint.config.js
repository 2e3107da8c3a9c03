// `npm run lint`: checks the compiler does not make, with its type information.
import { defineConfig } from 'eslint/config';
import tseslint from 'typescript-eslint';

const EFFECT = '/^use(Layout|Insertion)?Effect$/';

export default defineConfig({
  files: ['src/**/*.{ts,tsx}'],
  extends: [tseslint.configs.base],
  languageOptions: {
    parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
  },
  rules: {
    // An arrow that returns a call hands the call's value to its caller.
    // React takes what an effect returns as its cleanup: with
    // `useEffect(() => el.scrollIntoView())`, a browser whose
    // scrollIntoView returns a Promise (Chromium 156) gets it called,
    // throws and unmounts the page. Types cannot tell (the DOM types say
    // void, and the rule below skips `a?.b()`), so an effect's arrow needs
    // a block body, returning its cleanup explicitly.
    'no-restricted-syntax': [
      'error',
      ...[`CallExpression[callee.name=${EFFECT}]`, `CallExpression[callee.property.name=${EFFECT}]`].map(
        (call) => ({
          selector: `${call} > ArrowFunctionExpression[body.type!="BlockStatement"]`,
          message: 'An effect returns its cleanup: give the arrow a block body and return only a function.',
        }),
      ),
    ],
    // Anywhere else, a void call returned from an arrow is a value nobody
    // meant to hand over; `() => void promise()` says so on purpose.
    '@typescript-eslint/no-confusing-void-expression': ['error', { ignoreVoidOperator: true }],
  },
});
