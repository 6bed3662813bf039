/* 数组平移内核：把前一半元素乘以二分之一后写到后面（K 是参数）。数组平移内核：把前一半元素乘以二分之一后写到后面（K 是参数）。
   数组平移内核：把前一半元素乘以二分之一后写到后面（K 是参数）。数组平移内核：把前一半元素乘以二分之一后写到后面（K 是参数）。 */
void shift(int K, double *restrict a)
{
    for (int i = 0; i < 4; i++)
        a[i + K] = a[i] * 0.5;
}

#define K 4   /* main's size; the kernel's K is its parameter */
